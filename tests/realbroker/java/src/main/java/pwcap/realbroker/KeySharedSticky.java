package pwcap.realbroker;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.KeySharedPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Key_Shared with sticky hash ranges while the consumers change: the low half's consumer is
 * alone at first, so the keys of the high half wait in the backlog; a consumer declaring the
 * high half joins mid-stream and is given them; the low half's consumer leaves, and its keys
 * wait until another consumer declares the low half.
 */
final class KeySharedSticky {
    private static final String SUBSCRIPTION = "kss-sub";
    private static final int KEYS = 8;
    private static final int PER_ROUND = 16;
    private static final int QUIET_MS = 1_500;

    private final Scenarios s;
    private int seq;

    KeySharedSticky(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("sticky");
        try (PulsarClient client = s.client()) {
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("kss-producer").enableBatching(false).create();
            Consumer<byte[]> low = join(client, topic, "kss-low", Range.of(0, 32767));
            send(producer);
            int owed = PER_ROUND - ackUntilQuiet(low);  // the high half's keys wait

            Consumer<byte[]> high = join(client, topic, "kss-high", Range.of(32768, 65535));
            send(producer);
            s.drainAndAck(List.of(low, high), owed + PER_ROUND);
            Scenarios.settle();
            low.close();
            s.record.event("consumer_left", Map.of("consumer_name", "kss-low"));

            send(producer);
            owed = PER_ROUND - ackUntilQuiet(high);  // the low half's keys wait again
            Consumer<byte[]> low2 = join(client, topic, "kss-low-2", Range.of(0, 32767));
            s.drainAndAck(List.of(high, low2), owed);
            Scenarios.settle();
            producer.close();
            high.close();
            low2.close();
        }
    }

    /** Subscribe a consumer declaring {@code range}; the record names the range. */
    private Consumer<byte[]> join(PulsarClient client, String topic, String name, Range range)
            throws PulsarClientException {
        Consumer<byte[]> consumer = s.consumer(client, topic, SUBSCRIPTION, name,
                        SubscriptionType.Key_Shared)
                .keySharedPolicy(KeySharedPolicy.stickyHashRange().ranges(range))
                .receiverQueueSize(20).subscribe();
        s.record.event("consumer_joined", Map.of("consumer_name", name,
                "hash_ranges", List.of(List.of(range.getStart(), range.getEnd()))));
        return consumer;
    }

    private void send(Producer<byte[]> producer) throws PulsarClientException {
        for (int i = 0; i < PER_ROUND; i++, seq++) {
            s.send(producer, seq, Scenarios.payload(seq, 100), "key-" + (seq % KEYS),
                    Scenarios.properties("key_shared_sticky", seq));
        }
    }

    /** Receive and ack until nothing has come for a while; how many came. */
    private int ackUntilQuiet(Consumer<byte[]> consumer) throws PulsarClientException {
        int count = 0;
        Message<byte[]> message;
        while ((message = consumer.receive(QUIET_MS, TimeUnit.MILLISECONDS)) != null) {
            s.ack(consumer, message);
            count++;
        }
        return count;
    }
}
