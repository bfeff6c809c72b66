/*
 * The compiled data path of a flow: produce consumed records to the target and track their
 * delivery reports, with no Python object per record on the produce side.
 *
 * Why: a copy's CPU went mostly to Python per record (the produce() call, the held-copy tuples,
 * delivery reports through Python); bench/native_copy.c showed that the same copy with no Python
 * costs about what Python's produce-only costs alone. Python keeps everything that is not per
 * record: the consumer and its group, commits, outages, backpressure and the offset-sync rule
 * (replicator.flow.syncs.offset_sync), which this module feeds in bulk.
 *
 * Contract (replicator.flow.copying.native_copier wraps it):
 * - CopyCore(config_items, librdkafka_path, every): its own idempotent producer on the target,
 *   built from the flow's producer settings (strings). librdkafka is not linked: its functions are
 *   looked up in the very library confluent-kafka loaded (dlopen of its path), so both sides of
 *   the flow run one client library.
 * - copy(messages, remote_for, consumer_error, stamp, stamp_all) produces every record of a
 *   consumed batch (confluent_kafka.Message objects) to its remote topic, same partition, key,
 *   value, headers and timestamp; returns (copied, bytes, skipped).
 * - Every delivery report is served in C. Per target partition (a lane), in delivery order (the
 *   idempotent producer keeps it), deliveries contiguous on both sides are gathered into segments;
 *   a delivery that is not contiguous with its lane's previous one (or a lane's first) is a
 *   segment of its own. take() hands the segments over, oldest first per lane, as
 *   (source_topic, partition, last_upstream, last_downstream, [timestamps], target_topic): exactly
 *   what SyncLedger.delivered_span takes, so the mapping is as exact as per-record reports.
 * - poll/flush/len/purge/refresh behave as confluent's Producer methods of those names.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* librdkafka's functions, looked up at load time (typeof keeps the header's prototypes) */
#define RDK_FUNCS(X)                                                                                  \
    X(rd_kafka_conf_new)                                                                              \
    X(rd_kafka_conf_destroy)                                                                          \
    X(rd_kafka_conf_set)                                                                              \
    X(rd_kafka_conf_set_dr_msg_cb)                                                                    \
    X(rd_kafka_conf_set_error_cb)                                                                     \
    X(rd_kafka_conf_set_log_cb)                                                                       \
    X(rd_kafka_conf_set_opaque)                                                                       \
    X(rd_kafka_new)                                                                                   \
    X(rd_kafka_destroy)                                                                               \
    X(rd_kafka_opaque)                                                                                \
    X(rd_kafka_name)                                                                                  \
    X(rd_kafka_topic_new)                                                                             \
    X(rd_kafka_topic_destroy)                                                                         \
    X(rd_kafka_producev)                                                                              \
    X(rd_kafka_poll)                                                                                  \
    X(rd_kafka_flush)                                                                                 \
    X(rd_kafka_purge)                                                                                 \
    X(rd_kafka_outq_len)                                                                              \
    X(rd_kafka_err2str)                                                                               \
    X(rd_kafka_headers_new)                                                                           \
    X(rd_kafka_headers_destroy)                                                                       \
    X(rd_kafka_header_add)                                                                            \
    X(rd_kafka_metadata)                                                                              \
    X(rd_kafka_metadata_destroy)

#define RDK_DECLARE(f) static __typeof__(f) *p_##f;
RDK_FUNCS(RDK_DECLARE)

static int loaded = 0;

static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    if (loaded)
        Py_RETURN_NONE;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "cannot load librdkafka from %s: %s", path, dlerror());
        return NULL;
    }
#define RDK_LOAD(f)                                                                                   \
    p_##f = (__typeof__(f) *)dlsym(lib, #f);                                                          \
    if (p_##f == NULL) {                                                                              \
        PyErr_Format(PyExc_ImportError, "librdkafka at %s has no %s", path, #f);                     \
        return NULL;                                                                                  \
    }
    RDK_FUNCS(RDK_LOAD)
    loaded = 1;
    Py_RETURN_NONE;
}

/* ---- small growable vectors ------------------------------------------------------------------ */
typedef struct {
    int64_t *v;
    size_t n, cap;
} I64Vec;

static int vec_push(I64Vec *a, int64_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof(int64_t));
        if (v == NULL)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* What is in flight to one lane, oldest first: upstream offset and timestamp of each copy. */
typedef struct {
    int64_t *u, *ts;
    size_t cap, head, len;
} Ring;

static int ring_push(Ring *r, int64_t u, int64_t ts) {
    if (r->len == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        int64_t *nu = malloc(cap * sizeof(int64_t)), *nts = malloc(cap * sizeof(int64_t));
        if (nu == NULL || nts == NULL) {
            free(nu);
            free(nts);
            return -1;
        }
        for (size_t i = 0; i < r->len; i++) {
            nu[i] = r->u[(r->head + i) % r->cap];
            nts[i] = r->ts[(r->head + i) % r->cap];
        }
        free(r->u);
        free(r->ts);
        r->u = nu;
        r->ts = nts;
        r->cap = cap;
        r->head = 0;
    }
    size_t at = (r->head + r->len) % r->cap;
    r->u[at] = u;
    r->ts[at] = ts;
    r->len++;
    return 0;
}

/* ---- lanes and segments ---------------------------------------------------------------------- */
typedef struct Lane {
    PyObject *source_topic, *target_topic; /* str */
    rd_kafka_topic_t *rkt;
    int32_t partition;
    Ring inflight;
    int has_last;          /* a delivery was handed over since the lane started or was forgotten */
    size_t stale;          /* the oldest copies in flight were produced before the lane was forgotten */
    int64_t last_u, last_d; /* the lane's last delivery (handed over or in the open segment) */
    I64Vec open_ts;         /* timestamps of the open segment (deliveries not yet handed over) */
    int64_t copied, bytes, last_ts; /* produced since the last take_metrics */
} Lane;

typedef struct {
    Lane *lane;
    int64_t u, d;
    size_t ts_at, n;
} Segment;

typedef struct {
    int code;
    int fatal;
    char *reason;
} ClientError;

typedef struct {
    int level;
    char *fac, *buf;
} LogLine;

typedef struct {
    PyObject_HEAD rd_kafka_t *rk;
    PyObject *lanes;      /* dict (target_topic, partition) -> capsule(Lane) */
    PyTypeObject *fast_type; /* the message type whose fields are read directly (verified), or NULL */
    int fast_checked;        /* a type was checked: fast_type says whether it passed */
    long long fast_reads;    /* records whose fields were read directly (tests look) */
    Lane **all;           /* every lane, for iteration */
    size_t nlanes, cap_lanes;
    Segment *segs;
    size_t nsegs, cap_segs;
    I64Vec seg_ts;
    int64_t every;        /* longest segment handed over */
    int64_t in_flight;
    int delivery_err;     /* first failed delivery (purges excepted) */
    char delivery_reason[512];
    ClientError *errors;
    size_t nerrors, cap_errors;
    pthread_mutex_t log_lock; /* log lines can come from librdkafka's threads */
    LogLine *logs;
    size_t nlogs, cap_logs;
} CopyCore;

static int add_segment(CopyCore *c, Lane *lane) {
    if (lane->open_ts.n == 0)
        return 0;
    if (c->nsegs == c->cap_segs) {
        size_t cap = c->cap_segs ? c->cap_segs * 2 : 256;
        Segment *s = realloc(c->segs, cap * sizeof(Segment));
        if (s == NULL)
            return -1;
        c->segs = s;
        c->cap_segs = cap;
    }
    Segment *s = &c->segs[c->nsegs++];
    s->lane = lane;
    s->u = lane->last_u;
    s->d = lane->last_d;
    s->ts_at = c->seg_ts.n;
    s->n = lane->open_ts.n;
    for (size_t i = 0; i < lane->open_ts.n; i++)
        if (vec_push(&c->seg_ts, lane->open_ts.v[i]) < 0)
            return -1;
    lane->open_ts.n = 0;
    return 0;
}

/* A delivery report (served by rd_kafka_poll/flush on the caller's thread; touches no Python). */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    CopyCore *c = opaque;
    Lane *lane = m->_private;
    (void)rk;
    if (lane == NULL || lane->inflight.len == 0)
        return;
    Ring *r = &lane->inflight;
    int64_t u = r->u[r->head], ts = r->ts[r->head];
    r->head = (r->head + 1) % r->cap;
    r->len--;
    c->in_flight--;
    int stale = lane->stale > 0;
    if (stale)
        lane->stale--;
    if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE && m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT &&
            !c->delivery_err) {
            c->delivery_err = m->err;
            snprintf(c->delivery_reason, sizeof(c->delivery_reason), "%s", p_rd_kafka_err2str(m->err));
        }
        return;
    }
    if (stale)
        return; /* of a session that ended (forget): not handed over, its copy is recovered by content */
    int64_t d = m->offset;
    int contiguous = lane->has_last && u == lane->last_u + 1 && d == lane->last_d + 1;
    if (!contiguous || (int64_t)lane->open_ts.n >= c->every)
        add_segment(c, lane);
    lane->has_last = 1;
    lane->last_u = u;
    lane->last_d = d;
    vec_push(&lane->open_ts, ts);
    if (!contiguous)
        add_segment(c, lane); /* a break (or a first copy) is a segment of its own: the tracker's rule */
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    CopyCore *c = opaque;
    (void)rk;
    if (c->nerrors == c->cap_errors) {
        if (c->cap_errors >= 1024)
            return; /* nobody asked in a long time: keep the oldest */
        size_t cap = c->cap_errors ? c->cap_errors * 2 : 8;
        ClientError *e = realloc(c->errors, cap * sizeof(ClientError));
        if (e == NULL)
            return;
        c->errors = e;
        c->cap_errors = cap;
    }
    ClientError *e = &c->errors[c->nerrors++];
    e->code = err;
    e->fatal = err == RD_KAFKA_RESP_ERR__FATAL;
    e->reason = strdup(reason ? reason : "");
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    CopyCore *c = p_rd_kafka_opaque(rk);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->log_lock);
    if (c->nlogs == c->cap_logs && c->cap_logs < 4096) {
        size_t cap = c->cap_logs ? c->cap_logs * 2 : 16;
        LogLine *l = realloc(c->logs, cap * sizeof(LogLine));
        if (l != NULL) {
            c->logs = l;
            c->cap_logs = cap;
        }
    }
    if (c->nlogs < c->cap_logs) {
        LogLine *l = &c->logs[c->nlogs++];
        l->level = level;
        l->fac = strdup(fac);
        l->buf = strdup(buf);
    }
    pthread_mutex_unlock(&c->log_lock);
}

/* ---- the type -------------------------------------------------------------------------------- */
static void free_lanes(CopyCore *c) {
    for (size_t i = 0; i < c->nlanes; i++) {
        Lane *l = c->all[i];
        if (l->rkt)
            p_rd_kafka_topic_destroy(l->rkt);
        Py_XDECREF(l->source_topic);
        Py_XDECREF(l->target_topic);
        free(l->inflight.u);
        free(l->inflight.ts);
        free(l->open_ts.v);
        free(l);
    }
    free(c->all);
    c->all = NULL;
    c->nlanes = c->cap_lanes = 0;
}

static void close_producer(CopyCore *c) {
    if (c->rk == NULL)
        return;
    rd_kafka_t *rk = c->rk;
    Py_BEGIN_ALLOW_THREADS;
    p_rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    p_rd_kafka_poll(rk, 0);
    Py_END_ALLOW_THREADS;
    for (size_t i = 0; i < c->nlanes; i++) {
        if (c->all[i]->rkt) {
            p_rd_kafka_topic_destroy(c->all[i]->rkt);
            c->all[i]->rkt = NULL;
        }
    }
    Py_BEGIN_ALLOW_THREADS;
    p_rd_kafka_destroy(rk);
    Py_END_ALLOW_THREADS;
    c->rk = NULL;
}

static void CopyCore_dealloc(CopyCore *c) {
    close_producer(c);
    free_lanes(c);
    Py_XDECREF(c->lanes);
    free(c->segs);
    free(c->seg_ts.v);
    for (size_t i = 0; i < c->nerrors; i++)
        free(c->errors[i].reason);
    free(c->errors);
    for (size_t i = 0; i < c->nlogs; i++) {
        free(c->logs[i].fac);
        free(c->logs[i].buf);
    }
    free(c->logs);
    pthread_mutex_destroy(&c->log_lock);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int CopyCore_init(CopyCore *c, PyObject *args, PyObject *kwds) {
    PyObject *items;
    long long every;
    char err[512];
    if (!PyArg_ParseTuple(args, "OL", &items, &every))
        return -1;
    if (!loaded) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka is not loaded: call load(path) first");
        return -1;
    }
    c->every = every < 1 ? 1 : every;
    pthread_mutex_init(&c->log_lock, NULL);
    c->lanes = PyDict_New();
    if (c->lanes == NULL)
        return -1;
    rd_kafka_conf_t *conf = p_rd_kafka_conf_new();
    PyObject *seq = PySequence_Fast(items, "config must be a sequence of (name, value) strings");
    if (seq == NULL) {
        p_rd_kafka_conf_destroy(conf);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        const char *name, *value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ss", &name, &value)) {
            Py_DECREF(seq);
            p_rd_kafka_conf_destroy(conf);
            return -1;
        }
        if (p_rd_kafka_conf_set(conf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
            PyErr_Format(PyExc_ValueError, "producer setting %s: %s", name, err);
            Py_DECREF(seq);
            p_rd_kafka_conf_destroy(conf);
            return -1;
        }
    }
    Py_DECREF(seq);
    p_rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    p_rd_kafka_conf_set_error_cb(conf, on_error);
    p_rd_kafka_conf_set_log_cb(conf, on_log);
    p_rd_kafka_conf_set_opaque(conf, c);
    c->rk = p_rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (c->rk == NULL) { /* conf is still ours on failure */
        p_rd_kafka_conf_destroy(conf);
        PyErr_Format(PyExc_ValueError, "cannot create the copy producer: %s", err);
        return -1;
    }
    return 0;
}

static Lane *lane_for(CopyCore *c, PyObject *source_topic, PyObject *target_topic, int32_t partition) {
    PyObject *key = Py_BuildValue("(Oi)", target_topic, partition);
    if (key == NULL)
        return NULL;
    PyObject *cap = PyDict_GetItemWithError(c->lanes, key);
    if (cap != NULL) {
        Py_DECREF(key);
        return PyCapsule_GetPointer(cap, NULL);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(target_topic);
    Lane *lane = name ? calloc(1, sizeof(Lane)) : NULL;
    if (lane == NULL) {
        Py_DECREF(key);
        return (Lane *)(name ? PyErr_NoMemory() : NULL);
    }
    lane->rkt = p_rd_kafka_topic_new(c->rk, name, NULL);
    if (lane->rkt == NULL) {
        free(lane);
        Py_DECREF(key);
        PyErr_Format(PyExc_ValueError, "cannot use target topic %U", target_topic);
        return NULL;
    }
    Py_INCREF(source_topic);
    Py_INCREF(target_topic);
    lane->source_topic = source_topic;
    lane->target_topic = target_topic;
    lane->partition = partition;
    lane->last_ts = -1;
    if (c->nlanes == c->cap_lanes) {
        size_t ncap = c->cap_lanes ? c->cap_lanes * 2 : 16;
        Lane **all = realloc(c->all, ncap * sizeof(Lane *));
        if (all == NULL) {
            Py_DECREF(key);
            return (Lane *)PyErr_NoMemory();
        }
        c->all = all;
        c->cap_lanes = ncap;
    }
    c->all[c->nlanes++] = lane;
    cap = PyCapsule_New(lane, NULL, NULL);
    if (cap == NULL || PyDict_SetItem(c->lanes, key, cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(cap);
    Py_DECREF(key);
    return lane;
}

/* Build librdkafka headers from confluent's [(name, value-or-None), ...]. */
static int to_headers(PyObject *list, rd_kafka_headers_t **out) {
    *out = NULL;
    if (list == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(list, "headers must be a list of (name, value) pairs");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    rd_kafka_headers_t *h = p_rd_kafka_headers_new((size_t)n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *name, *value;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (name, value) tuple");
            goto fail;
        }
        name = PyTuple_GET_ITEM(pair, 0);
        value = PyTuple_GET_ITEM(pair, 1);
        Py_ssize_t nlen;
        const char *nstr = PyUnicode_AsUTF8AndSize(name, &nlen);
        if (nstr == NULL)
            goto fail;
        if (value == Py_None) {
            p_rd_kafka_header_add(h, nstr, nlen, NULL, 0);
        } else {
            char *v;
            Py_ssize_t vlen;
            if (PyBytes_AsStringAndSize(value, &v, &vlen) < 0)
                goto fail;
            p_rd_kafka_header_add(h, nstr, nlen, v, vlen);
        }
    }
    Py_DECREF(seq);
    *out = h;
    return 0;
fail:
    Py_DECREF(seq);
    p_rd_kafka_headers_destroy(h);
    return -1;
}

static PyObject *S_error, *S_topic, *S_partition, *S_offset, *S_headers, *S_timestamp, *S_value, *S_key,
    *S_target_topic;

static PyObject *call0(PyObject *o, PyObject *name) { return PyObject_CallMethodNoArgs(o, name); }

/* The fields of a consumed record, as new references (value, key, headers: Py_None when absent). */
typedef struct {
    PyObject *topic, *value, *key, *headers;
    long partition;
    int64_t offset, ts; /* ts -1: none */
} Fields;

static void fields_clear(Fields *f) {
    Py_CLEAR(f->topic);
    Py_CLEAR(f->value);
    Py_CLEAR(f->key);
    Py_CLEAR(f->headers);
}

/*
 * confluent_kafka.Message's C layout (confluent_kafka.h). Reading it saves eight method calls per
 * record; it is used only for a message type whose first message read the same both ways
 * (verify_layout), so a confluent-kafka whose layout differs falls back to the methods.
 */
typedef struct {
    PyObject_HEAD PyObject *topic, *value, *key, *headers;
    void *c_headers;
    PyObject *error;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    int64_t timestamp;
    int tstype;
    int64_t latency;
} CflMessage;

static PyObject *or_none(PyObject *o) { return o ? o : Py_None; }

/* Through the methods: any object with confluent's Message methods. */
static int fields_by_methods(PyObject *msg, Fields *f) {
    PyObject *pobj = call0(msg, S_partition), *oobj = pobj ? call0(msg, S_offset) : NULL;
    PyObject *tsobj = oobj ? call0(msg, S_timestamp) : NULL;
    f->topic = tsobj ? call0(msg, S_topic) : NULL;
    f->headers = f->topic ? call0(msg, S_headers) : NULL;
    f->value = f->headers ? call0(msg, S_value) : NULL;
    f->key = f->value ? call0(msg, S_key) : NULL;
    int ok = f->key != NULL;
    if (ok) {
        f->partition = PyLong_AsLong(pobj);
        f->offset = PyLong_AsLongLong(oobj);
        f->ts = PyLong_AsLong(PyTuple_GET_ITEM(tsobj, 0)) == 0 ? -1 : PyLong_AsLongLong(PyTuple_GET_ITEM(tsobj, 1));
        ok = !PyErr_Occurred();
    }
    Py_XDECREF(pobj);
    Py_XDECREF(oobj);
    Py_XDECREF(tsobj);
    if (!ok)
        fields_clear(f);
    return ok ? 0 : -1;
}

/* Directly from the struct (a verified type); headers not yet converted go through the method. */
static int fields_by_layout(PyObject *msg, Fields *f) {
    CflMessage *m = (CflMessage *)msg;
    if (m->topic == NULL || !PyUnicode_Check(m->topic) || (m->value && !PyBytes_Check(m->value)) ||
        (m->key && !PyBytes_Check(m->key)))
        return fields_by_methods(msg, f);
    f->topic = Py_NewRef(m->topic);
    f->value = Py_NewRef(or_none(m->value));
    f->key = Py_NewRef(or_none(m->key));
    f->headers = m->headers ? Py_NewRef(m->headers) : m->c_headers ? call0(msg, S_headers) : Py_NewRef(Py_None);
    if (f->headers == NULL) {
        fields_clear(f);
        return -1;
    }
    f->partition = m->partition;
    f->offset = m->offset;
    f->ts = m->tstype == 0 ? -1 : m->timestamp;
    return 0;
}

/* Whether ``msg`` (a confluent_kafka.Message without error) reads the same through the layout. */
static int verify_layout(PyObject *msg) {
    if (Py_TYPE(msg)->tp_basicsize < (Py_ssize_t)offsetof(CflMessage, latency))
        return 0;
    Fields a = {0}, b = {0};
    if (fields_by_methods(msg, &a) < 0) {
        PyErr_Clear();
        return 0;
    }
    CflMessage *m = (CflMessage *)msg;
    int same = m->topic == a.topic && or_none(m->value) == a.value && or_none(m->key) == a.key &&
               m->partition == a.partition && m->offset == a.offset &&
               (m->tstype == 0 ? -1 : m->timestamp) == a.ts && (m->headers == NULL || m->headers == a.headers);
    if (same && fields_by_layout(msg, &b) == 0) {
        same = b.topic == a.topic && b.value == a.value && b.key == a.key && b.headers == a.headers;
        fields_clear(&b);
    }
    PyErr_Clear();
    fields_clear(&a);
    return same;
}

/* Produce one record, serving deliveries while the local queue is full; 0 or a librdkafka error. */
static int produce(CopyCore *c, Lane *lane, const char *v, size_t vlen, const char *k, size_t klen, int64_t ts,
                   rd_kafka_headers_t *h) {
    for (;;) {
        rd_kafka_resp_err_t err = p_rd_kafka_producev(
            c->rk, RD_KAFKA_V_RKT(lane->rkt), RD_KAFKA_V_PARTITION(lane->partition),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE((void *)v, vlen), RD_KAFKA_V_KEY(k, klen),
            RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(lane), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            return err;
        rd_kafka_t *rk = c->rk;
        Py_BEGIN_ALLOW_THREADS;
        p_rd_kafka_poll(rk, 50); /* the local queue is full: let deliveries drain it */
        Py_END_ALLOW_THREADS;
    }
}

/* A metadata request for one topic (a partition added since): 0 or librdkafka's error. */
static rd_kafka_resp_err_t refresh_topic(CopyCore *c, rd_kafka_topic_t *rkt, int timeout_ms) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    rd_kafka_t *rk = c->rk;
    Py_BEGIN_ALLOW_THREADS;
    err = p_rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    Py_END_ALLOW_THREADS;
    if (md != NULL)
        p_rd_kafka_metadata_destroy(md);
    return err;
}

static PyObject *CopyCore_copy(CopyCore *c, PyObject *args) {
    PyObject *messages, *remote_for, *consumer_error, *stamp;
    int stamp_all;
    if (!PyArg_ParseTuple(args, "O!OOOp", &PyList_Type, &messages, &remote_for, &consumer_error, &stamp, &stamp_all))
        return NULL;
    if (c->rk == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the copy producer is closed");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(messages);
    long long copied = 0, nbytes = 0, skipped = 0;
    PyObject *last_topic = NULL; /* a reference of ours */
    long last_partition = -1;
    Lane *lane = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = PyList_GET_ITEM(messages, i);
        int fast = Py_TYPE(msg) == c->fast_type;
        if (!fast || (((CflMessage *)msg)->error != NULL && ((CflMessage *)msg)->error != Py_None)) {
            PyObject *err = call0(msg, S_error);
            if (err == NULL)
                goto fail;
            if (err != Py_None) {
                PyObject *r = PyObject_CallOneArg(consumer_error, err);
                Py_DECREF(err);
                if (r == NULL)
                    goto fail;
                Py_DECREF(r);
                continue;
            }
            Py_DECREF(err);
        }
        if (!c->fast_checked) {
            c->fast_checked = 1;
            c->fast_type = verify_layout(msg) ? Py_TYPE(msg) : NULL;
            fast = Py_TYPE(msg) == c->fast_type;
        }
        Fields f = {0};
        if (fast) {
            c->fast_reads++;
            if (fields_by_layout(msg, &f) < 0)
                goto fail;
        } else if (fields_by_methods(msg, &f) < 0) {
            goto fail;
        }
        PyObject *topic = f.topic, *headers = f.headers, *value = f.value, *key = f.key;
        long partition = f.partition;
        int64_t upstream = f.offset, ts = f.ts;
        f.topic = NULL; /* ours now, kept as last_topic or dropped below */
        if (partition != last_partition || last_topic == NULL ||
            (topic != last_topic && PyUnicode_Compare(topic, last_topic) != 0)) {
            PyObject *remote = PyObject_CallFunction(remote_for, "Ol", topic, partition);
            PyObject *target = remote ? PyObject_GetAttr(remote, S_target_topic) : NULL;
            Py_XDECREF(remote);
            lane = target ? lane_for(c, topic, target, (int32_t)partition) : NULL;
            Py_XDECREF(target);
            if (lane == NULL) {
                Py_DECREF(topic);
                fields_clear(&f);
                goto fail;
            }
            Py_XSETREF(last_topic, topic);
            last_partition = partition;
        } else {
            Py_DECREF(topic);
        }
        if (headers != Py_None || stamp_all) {
            PyObject *res = PyObject_CallOneArg(stamp, headers);
            if (res == NULL) {
                fields_clear(&f);
                goto fail;
            }
            int copy = PyObject_IsTrue(PyTuple_GET_ITEM(res, 0));
            Py_SETREF(f.headers, Py_NewRef(PyTuple_GET_ITEM(res, 1)));
            headers = f.headers;
            Py_DECREF(res);
            if (!copy) {
                fields_clear(&f);
                skipped++; /* it came from the target: copying it back would close a cycle */
                continue;
            }
        }
        /* ts -1: no timestamp: the target stamps its own; the sync says -1 */
        rd_kafka_headers_t *h = NULL;
        if (to_headers(headers, &h) < 0) {
            fields_clear(&f);
            goto fail;
        }
        const char *v = value == Py_None ? NULL : PyBytes_AS_STRING(value);
        size_t vlen = value == Py_None ? 0 : (size_t)PyBytes_GET_SIZE(value);
        const char *k = key == Py_None ? NULL : PyBytes_AS_STRING(key);
        size_t klen = key == Py_None ? 0 : (size_t)PyBytes_GET_SIZE(key);
        int perr = produce(c, lane, v, vlen, k, klen, ts, h);
        if (perr == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) { /* a partition created since our metadata */
            refresh_topic(c, lane->rkt, 10000);
            perr = produce(c, lane, v, vlen, k, klen, ts, h);
        }
        fields_clear(&f); /* value and key were copied by librdkafka (RD_KAFKA_MSG_F_COPY) */
        if (perr) {
            if (h)
                p_rd_kafka_headers_destroy(h); /* not taken by a failed produce */
            PyErr_Format(PyExc_OSError, "cannot write to %U[%d]: %s (librdkafka error %d)", lane->target_topic,
                         lane->partition, p_rd_kafka_err2str(perr), perr);
            goto fail;
        }
        if (ring_push(&lane->inflight, upstream, ts) < 0)
            { PyErr_NoMemory(); goto fail; }
        c->in_flight++;
        copied++;
        nbytes += (long long)(vlen + klen);
        lane->copied++;
        lane->bytes += (int64_t)(vlen + klen);
        lane->last_ts = ts;
    }
    Py_XDECREF(last_topic);
    return Py_BuildValue("(LLL)", copied, nbytes, skipped);
fail:
    Py_XDECREF(last_topic);
    return NULL;
}

static PyObject *CopyCore_poll(CopyCore *c, PyObject *args) {
    double timeout;
    int served = 0;
    if (!PyArg_ParseTuple(args, "d", &timeout))
        return NULL;
    if (c->rk == NULL)
        return PyLong_FromLong(0);
    rd_kafka_t *rk = c->rk;
    Py_BEGIN_ALLOW_THREADS;
    served = p_rd_kafka_poll(rk, (int)(timeout * 1000));
    Py_END_ALLOW_THREADS;
    return PyLong_FromLong(served);
}

static PyObject *CopyCore_flush(CopyCore *c, PyObject *args) {
    double timeout;
    if (!PyArg_ParseTuple(args, "d", &timeout))
        return NULL;
    if (c->rk == NULL)
        return PyLong_FromLong(0);
    rd_kafka_t *rk = c->rk;
    int left;
    Py_BEGIN_ALLOW_THREADS;
    p_rd_kafka_flush(rk, (int)(timeout * 1000));
    left = p_rd_kafka_outq_len(rk);
    Py_END_ALLOW_THREADS;
    return PyLong_FromLong(left);
}

static PyObject *CopyCore_purge(CopyCore *c, PyObject *unused) {
    if (c->rk != NULL) {
        rd_kafka_t *rk = c->rk;
        Py_BEGIN_ALLOW_THREADS;
        p_rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        p_rd_kafka_poll(rk, 0);
        Py_END_ALLOW_THREADS;
    }
    Py_RETURN_NONE;
}

static PyObject *CopyCore_close(CopyCore *c, PyObject *unused) {
    close_producer(c);
    Py_RETURN_NONE;
}

static PyObject *CopyCore_refresh(CopyCore *c, PyObject *args) {
    const char *topic;
    double timeout;
    if (!PyArg_ParseTuple(args, "sd", &topic, &timeout))
        return NULL;
    if (c->rk == NULL)
        return PyLong_FromLong(RD_KAFKA_RESP_ERR__DESTROY);
    rd_kafka_topic_t *rkt = p_rd_kafka_topic_new(c->rk, topic, NULL);
    rd_kafka_resp_err_t err = refresh_topic(c, rkt, (int)(timeout * 1000));
    p_rd_kafka_topic_destroy(rkt);
    return PyLong_FromLong(err);
}

/* Hand over every delivered segment (closing the open ones): see the contract at the top. */
static PyObject *CopyCore_take(CopyCore *c, PyObject *unused) {
    for (size_t i = 0; i < c->nlanes; i++)
        if (add_segment(c, c->all[i]) < 0)
            return PyErr_NoMemory();
    PyObject *out = PyList_New((Py_ssize_t)c->nsegs);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < c->nsegs; i++) {
        Segment *s = &c->segs[i];
        PyObject *ts = PyList_New((Py_ssize_t)s->n);
        if (ts == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        for (size_t j = 0; j < s->n; j++)
            PyList_SET_ITEM(ts, (Py_ssize_t)j, PyLong_FromLongLong(c->seg_ts.v[s->ts_at + j]));
        PyObject *t = Py_BuildValue("(OiLLNO)", s->lane->source_topic, s->lane->partition, (long long)s->u,
                                    (long long)s->d, ts, s->lane->target_topic);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    c->nsegs = 0;
    c->seg_ts.n = 0;
    return out;
}

/* Per lane copied since the last call: (target_topic, partition, records, bytes, last timestamp). */
static PyObject *CopyCore_take_metrics(CopyCore *c, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < c->nlanes; i++) {
        Lane *l = c->all[i];
        if (l->copied == 0)
            continue;
        PyObject *t = Py_BuildValue("(OiLLL)", l->target_topic, l->partition, (long long)l->copied,
                                    (long long)l->bytes, (long long)l->last_ts);
        if (t == NULL || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
        l->copied = l->bytes = 0;
    }
    return out;
}

/* (code, reason, fatal) of every client error since the last call, oldest first. */
static PyObject *CopyCore_take_errors(CopyCore *c, PyObject *unused) {
    PyObject *out = PyList_New((Py_ssize_t)c->nerrors);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < c->nerrors; i++) {
        PyList_SET_ITEM(out, (Py_ssize_t)i,
                        Py_BuildValue("(isO)", c->errors[i].code, c->errors[i].reason,
                                      c->errors[i].fatal ? Py_True : Py_False));
        free(c->errors[i].reason);
    }
    c->nerrors = 0;
    return out;
}

/* (syslog level, facility, line) of every log line since the last call, oldest first. */
static PyObject *CopyCore_take_logs(CopyCore *c, PyObject *unused) {
    pthread_mutex_lock(&c->log_lock);
    PyObject *out = PyList_New((Py_ssize_t)c->nlogs);
    for (size_t i = 0; i < c->nlogs; i++) {
        if (out != NULL)
            PyList_SET_ITEM(out, (Py_ssize_t)i, Py_BuildValue("(iss)", c->logs[i].level, c->logs[i].fac,
                                                              c->logs[i].buf));
        free(c->logs[i].fac);
        free(c->logs[i].buf);
    }
    c->nlogs = 0;
    pthread_mutex_unlock(&c->log_lock);
    return out;
}

/* The first failed delivery since the last call, as (code, reason), or None. */
static PyObject *CopyCore_take_delivery_error(CopyCore *c, PyObject *unused) {
    if (!c->delivery_err)
        Py_RETURN_NONE;
    PyObject *r = Py_BuildValue("(is)", c->delivery_err, c->delivery_reason);
    c->delivery_err = 0;
    return r;
}

/* Per source partition with copies in flight, the upstream offset of the oldest. */
static PyObject *CopyCore_oldest_in_flight(CopyCore *c, PyObject *unused) {
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < c->nlanes; i++) {
        Lane *l = c->all[i];
        if (l->inflight.len == 0)
            continue;
        PyObject *k = Py_BuildValue("(Oi)", l->source_topic, l->partition);
        PyObject *v = PyLong_FromLongLong(l->inflight.u[l->inflight.head]);
        if (k == NULL || v == NULL || PyDict_SetItem(out, k, v) < 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return out;
}

/* Source partitions given up (revoked, lost): their next delivery starts a session anew. */
static PyObject *CopyCore_forget(CopyCore *c, PyObject *args) {
    PyObject *source_topic;
    int partition;
    if (!PyArg_ParseTuple(args, "Ui", &source_topic, &partition))
        return NULL;
    for (size_t i = 0; i < c->nlanes; i++) {
        Lane *l = c->all[i];
        if (l->partition == partition && PyUnicode_Compare(l->source_topic, source_topic) == 0) {
            add_segment(c, l);
            l->has_last = 0;
            l->stale = l->inflight.len;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *CopyCore_in_flight(CopyCore *c, void *closure) { return PyLong_FromLongLong(c->in_flight); }

static PyObject *CopyCore_fast_reads(CopyCore *c, void *closure) { return PyLong_FromLongLong(c->fast_reads); }

static Py_ssize_t CopyCore_len(CopyCore *c) { return c->rk ? p_rd_kafka_outq_len(c->rk) : 0; }

static PyMethodDef CopyCore_methods[] = {
    {"copy", (PyCFunction)CopyCore_copy, METH_VARARGS, "produce a consumed batch: (copied, bytes, skipped)"},
    {"poll", (PyCFunction)CopyCore_poll, METH_VARARGS, "serve delivery reports and errors for up to timeout s"},
    {"flush", (PyCFunction)CopyCore_flush, METH_VARARGS, "wait up to timeout s for every delivery; what is left"},
    {"purge", (PyCFunction)CopyCore_purge, METH_NOARGS, "drop what is queued and in flight"},
    {"close", (PyCFunction)CopyCore_close, METH_NOARGS, "purge and destroy the producer"},
    {"refresh", (PyCFunction)CopyCore_refresh, METH_VARARGS, "metadata request for a topic: librdkafka error or 0"},
    {"take", (PyCFunction)CopyCore_take, METH_NOARGS, "delivered segments since the last call"},
    {"take_metrics", (PyCFunction)CopyCore_take_metrics, METH_NOARGS, "per lane copied since the last call"},
    {"take_errors", (PyCFunction)CopyCore_take_errors, METH_NOARGS, "client errors since the last call"},
    {"take_logs", (PyCFunction)CopyCore_take_logs, METH_NOARGS, "librdkafka log lines since the last call"},
    {"take_delivery_error", (PyCFunction)CopyCore_take_delivery_error, METH_NOARGS, "the first failed delivery"},
    {"oldest_in_flight", (PyCFunction)CopyCore_oldest_in_flight, METH_NOARGS, "oldest copy in flight per partition"},
    {"forget", (PyCFunction)CopyCore_forget, METH_VARARGS, "a source partition given up"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CopyCore_getset[] = {
    {"in_flight", (getter)CopyCore_in_flight, NULL, "records produced and not yet reported", NULL},
    {"fast_reads", (getter)CopyCore_fast_reads, NULL, "records whose fields were read from the struct", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods CopyCore_seq = {.sq_length = (lenfunc)CopyCore_len};

static PyTypeObject CopyCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "replicator.flow.copying._copycore.CopyCore",
    .tp_basicsize = sizeof(CopyCore),
    .tp_dealloc = (destructor)CopyCore_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A flow's compiled produce path (see the module's contract).",
    .tp_methods = CopyCore_methods,
    .tp_getset = CopyCore_getset,
    .tp_as_sequence = &CopyCore_seq,
    .tp_init = (initproc)CopyCore_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS, "look librdkafka's functions up in the library at path (once)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "replicator.flow.copying._copycore", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__copycore(void) {
#define INTERN(var, s)                                                                                \
    if ((var = PyUnicode_InternFromString(s)) == NULL)                                                \
        return NULL;
    INTERN(S_error, "error");
    INTERN(S_topic, "topic");
    INTERN(S_partition, "partition");
    INTERN(S_offset, "offset");
    INTERN(S_headers, "headers");
    INTERN(S_timestamp, "timestamp");
    INTERN(S_value, "value");
    INTERN(S_key, "key");
    INTERN(S_target_topic, "target_topic");
    if (PyType_Ready(&CopyCoreType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CopyCoreType);
    if (PyModule_AddObject(m, "CopyCore", (PyObject *)&CopyCoreType) < 0) {
        Py_DECREF(&CopyCoreType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
