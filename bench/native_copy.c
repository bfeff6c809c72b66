/*
 * The floor under any copier on librdkafka: a copy loop with no Python in it at all.
 *
 * Not part of mirrorlake. bench.replicate_vs_mm2 --native builds it (gcc, Debian's librdkafka-dev)
 * and runs it beside the contenders, so that "how close to raw produce-only can a copier on this
 * client library get" is a measurement rather than arithmetic. It does the least a correct
 * copier must: reads the source partitions from their start with the replicator's consumer
 * settings, produces every record (key, value, headers, timestamp) to the same partition of the
 * target with the replicator's producer settings (idempotent, acks=all, lz4, linger 1 ms), and
 * takes each delivery report's target offset as an exact mapping would. It keeps no Python objects,
 * copies no payload (a record is produced from the consumed message's own buffer, which is freed
 * in its delivery report), and commits nothing.
 *
 * usage: native_copy SOURCE_BOOTSTRAP SOURCE_TOPIC TARGET_BOOTSTRAP TARGET_TOPIC PARTITIONS COUNT
 * prints one line: records=N seconds=S cpu_seconds=C mapping_breaks=B, or exits 1 with an error line.
 * Then it waits for its standard input to close before it exits, so that the benchmark can read
 * its CPU time in /proc while it is still a live process.
 */
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BATCH 5000
#define MAX_PARTITIONS 1024

static int64_t delivered, failed, breaks;
static int64_t last_delta[MAX_PARTITIONS]; /* target - source offset of each partition's last delivery */

static void die(const char *what, const char *why) {
    fprintf(stderr, "error: %s: %s\n", what, why);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK)
        die(name, err);
}

/* A delivery report: the copy's target offset, as the replicator's offset syncs need it. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *out, void *opaque) {
    rd_kafka_message_t *in = out->_private;
    (void)rk;
    (void)opaque;
    if (out->err) {
        failed++;
    } else {
        int64_t delta = out->offset - in->offset;
        if (delta != last_delta[in->partition]) {
            breaks++; /* a new mapping segment: the replicator would publish an offset sync */
            last_delta[in->partition] = delta;
        }
        delivered++;
    }
    rd_kafka_message_destroy(in);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread: ours and librdkafka's */
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc != 7)
        die("usage", "native_copy SOURCE_BOOTSTRAP SOURCE_TOPIC TARGET_BOOTSTRAP TARGET_TOPIC PARTITIONS COUNT");
    const char *target_topic = argv[4];
    int partitions = atoi(argv[5]);
    int64_t count = strtoll(argv[6], NULL, 10);
    if (partitions < 1 || partitions > MAX_PARTITIONS || count < 1)
        die("arguments", "PARTITIONS must be 1-1024 and COUNT positive");
    for (int p = 0; p < MAX_PARTITIONS; p++)
        last_delta[p] = INT64_MIN;

    /* replicator.kafka.settings.consumer_config, minus the group (partitions are assigned) */
    rd_kafka_conf_t *cconf = rd_kafka_conf_new();
    set(cconf, "bootstrap.servers", argv[1]);
    set(cconf, "group.id", "bench-native-copy");
    set(cconf, "enable.auto.commit", "false");
    set(cconf, "isolation.level", "read_committed");
    set(cconf, "enable.partition.eof", "false");
    set(cconf, "fetch.max.bytes", "52428800");
    set(cconf, "queued.max.messages.kbytes", "65536");
    set(cconf, "fetch.queue.backoff.ms", "10");
    rd_kafka_t *consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, err, sizeof(err));
    if (!consumer)
        die("consumer", err);

    /* replicator.kafka.settings.producer_config of an at-least-once flow */
    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    set(pconf, "bootstrap.servers", argv[3]);
    set(pconf, "enable.idempotence", "true");
    set(pconf, "acks", "all");
    set(pconf, "compression.type", "lz4");
    set(pconf, "linger.ms", "1");
    set(pconf, "batch.num.messages", "10000");
    set(pconf, "queue.buffering.max.messages", "500000");
    set(pconf, "message.timeout.ms", "0");
    rd_kafka_conf_set_dr_msg_cb(pconf, on_delivery);
    rd_kafka_t *producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, err, sizeof(err));
    if (!producer)
        die("producer", err);

    rd_kafka_topic_partition_list_t *assignment = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(assignment, argv[2], p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t rc = rd_kafka_assign(consumer, assignment);
    rd_kafka_topic_partition_list_destroy(assignment);
    if (rc)
        die("assign", rd_kafka_err2str(rc));
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(consumer);

    rd_kafka_message_t *batch[BATCH];
    int64_t consumed = 0;
    double started = now(), cpu_started = cpu_seconds();
    while (consumed < count) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, 100, batch, BATCH);
        if (n < 0)
            die("consume", rd_kafka_err2str(rd_kafka_last_error()));
        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *in = batch[i];
            if (in->err) {
                fprintf(stderr, "error: consume: %s\n", rd_kafka_message_errstr(in));
                exit(1);
            }
            rd_kafka_headers_t *headers = NULL, *copied = NULL;
            if (rd_kafka_message_headers(in, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR)
                copied = rd_kafka_headers_copy(headers);
            rd_kafka_timestamp_type_t ts_type;
            int64_t ts = rd_kafka_message_timestamp(in, &ts_type);
            for (;;) {
                rc = rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(target_topic), RD_KAFKA_V_PARTITION(in->partition),
                                       RD_KAFKA_V_VALUE(in->payload, in->len), RD_KAFKA_V_KEY(in->key, in->key_len),
                                       RD_KAFKA_V_TIMESTAMP(ts_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : ts),
                                       RD_KAFKA_V_HEADERS(copied), RD_KAFKA_V_OPAQUE(in), RD_KAFKA_V_END);
                if (rc != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                    break;
                rd_kafka_poll(producer, 10); /* the local queue is full: serve deliveries */
            }
            if (rc)
                die("produce", rd_kafka_err2str(rc));
        }
        consumed += n;
        rd_kafka_poll(producer, 0);
    }
    while (delivered + failed < count)
        rd_kafka_poll(producer, 100);
    double seconds = now() - started, cpu = cpu_seconds() - cpu_started;
    if (failed)
        die("deliver", "some copies failed");
    printf("records=%" PRId64 " seconds=%.3f cpu_seconds=%.3f mapping_breaks=%" PRId64 "\n", delivered, seconds, cpu,
           breaks);
    fflush(stdout);
    while (getchar() != EOF)
        ;
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    rd_kafka_destroy(producer);
    return 0;
}
