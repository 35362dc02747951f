package pwcap.realbroker;

import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.KeySharedPolicy;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Key_Shared, both key-assignment modes: an auto-split subscription whose second consumer
 * joins after the first batch of keys and leaves before the last, and a sticky subscription
 * whose two consumers declare the two halves of the hash range.
 */
final class KeyShared {
    private final Scenarios s;

    KeyShared(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("keys");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> auto1 = s.consumer(client, topic, "ks-auto", "ks-auto-1",
                    SubscriptionType.Key_Shared).receiverQueueSize(20).subscribe();
            Consumer<byte[]> sticky1 = s.consumer(client, topic, "ks-sticky", "ks-sticky-low",
                    SubscriptionType.Key_Shared)
                    .keySharedPolicy(KeySharedPolicy.stickyHashRange().ranges(Range.of(0, 32767)))
                    .subscribe();
            Consumer<byte[]> sticky2 = s.consumer(client, topic, "ks-sticky", "ks-sticky-high",
                    SubscriptionType.Key_Shared)
                    .keySharedPolicy(KeySharedPolicy.stickyHashRange().ranges(Range.of(32768, 65535)))
                    .subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("ks-producer").enableBatching(false).create();
            int seq = 0;
            for (int i = 0; i < 24; i++, seq++) {
                s.send(producer, seq, Scenarios.payload(seq, 100), "key-" + (seq % 8),
                        Scenarios.properties("key_shared", seq));
            }
            s.receiveAndAck(auto1, 24);

            Consumer<byte[]> auto2 = s.consumer(client, topic, "ks-auto", "ks-auto-2",
                    SubscriptionType.Key_Shared).receiverQueueSize(20).subscribe();
            s.record.event("consumer_joined", Map.of("consumer_name", "ks-auto-2"));
            for (int i = 0; i < 24; i++, seq++) {
                s.send(producer, seq, Scenarios.payload(seq, 100), "key-" + (seq % 8),
                        Scenarios.properties("key_shared", seq));
            }
            s.drainAndAck(List.of(auto1, auto2), 24);
            Scenarios.settle();
            auto2.close();
            s.record.event("consumer_left", Map.of("consumer_name", "ks-auto-2"));

            for (int i = 0; i < 16; i++, seq++) {
                s.send(producer, seq, Scenarios.payload(seq, 100), "key-" + (seq % 8),
                        Scenarios.properties("key_shared", seq));
            }
            s.receiveAndAck(auto1, 16);
            s.drainAndAck(List.of(sticky1, sticky2), seq);
            Scenarios.settle();
            producer.close();
            auto1.close();
            sticky1.close();
            sticky2.close();
        }
    }
}
