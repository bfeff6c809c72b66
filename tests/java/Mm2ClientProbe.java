// MM2's own client library (connect-mirror-client), asked the questions a Java application asks
// when it fails over, against one cluster. Compiled and run by tests/mm2_client_probe.py.
//
// Arguments: <bootstrap> <replication.policy.class> <replication.policy.separator> <query>...
// Queries and the tab-separated lines each prints on stdout:
//   translate:<remote alias>:<group>  translate <alias> <group> <topic> <partition> <offset>   (one per partition)
//   hops:<alias>                      hops <alias> <n>
//   upstreamClusters                  upstreamClusters <alias>                                   (one per cluster)
//   heartbeatTopics                   heartbeatTopics <topic>                                    (one per topic)
//   checkpointTopics                  checkpointTopics <topic>                                   (one per topic)
// then "done". Anything else MM2's classes log goes to stderr.

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Mm2ClientProbe {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        props.put("replication.policy.class", args[1]);
        props.put("replication.policy.separator", args[2]);
        try (MirrorClient client = new MirrorClient(props)) {
            for (int i = 3; i < args.length; i++) {
                String[] q = args[i].split(":", 3);
                switch (q[0]) {
                    case "translate": {
                        Map<TopicPartition, OffsetAndMetadata> offsets =
                            RemoteClusterUtils.translateOffsets(props, q[1], q[2], Duration.ofSeconds(30));
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                            System.out.println(String.join("\t", "translate", q[1], q[2], e.getKey().topic(),
                                String.valueOf(e.getKey().partition()), String.valueOf(e.getValue().offset())));
                        }
                        break;
                    }
                    case "hops":
                        System.out.println("hops\t" + q[1] + "\t" + client.replicationHops(q[1]));
                        break;
                    case "upstreamClusters":
                        for (String alias : new TreeSet<>(client.upstreamClusters())) {
                            System.out.println("upstreamClusters\t" + alias);
                        }
                        break;
                    case "heartbeatTopics":
                        for (String topic : new TreeSet<>(client.heartbeatTopics())) {
                            System.out.println("heartbeatTopics\t" + topic);
                        }
                        break;
                    case "checkpointTopics":
                        for (String topic : new TreeSet<>(client.checkpointTopics())) {
                            System.out.println("checkpointTopics\t" + topic);
                        }
                        break;
                    default:
                        throw new IllegalArgumentException("unknown query " + args[i]);
                }
            }
        }
        System.out.println("done");
    }
}
