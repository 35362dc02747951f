package pwcap.realbroker;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

/**
 * A pattern subscription: the consumer watches the namespace's topic list (the broker's
 * topic-list watcher), and a topic created after it subscribed is announced and joined.
 */
final class Pattern {
    private final Scenarios s;

    Pattern(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String[] topics = {s.topic("pat-a"), s.topic("pat-b"), s.topic("pat-c")};
        try (PulsarClient client = s.client()) {
            Producer<byte[]> a = producer(client, topics[0], "pat-a-producer");
            Producer<byte[]> b = producer(client, topics[1], "pat-b-producer");
            Consumer<byte[]> consumer = client.newConsumer()
                    .topicsPattern("persistent://public/default/" + s.prefix + "-pat-.*")
                    .subscriptionName("pattern-sub").consumerName("pattern-consumer")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .patternAutoDiscoveryPeriod(60, TimeUnit.SECONDS)
                    .subscribe();
            for (int i = 0; i < 4; i++) {
                s.send(a, i, Scenarios.payload(i, 50), null, Scenarios.properties("pat-a", i));
                s.send(b, i, Scenarios.payload(10 + i, 50), null, Scenarios.properties("pat-b", i));
            }
            s.receiveAndAck(consumer, 8);
            Producer<byte[]> c = producer(client, topics[2], "pat-c-producer");
            s.record.event("topic_created", Map.of("topic", topics[2]));
            for (int i = 0; i < 4; i++) {
                s.send(c, i, Scenarios.payload(20 + i, 50), null, Scenarios.properties("pat-c", i));
            }
            s.receiveAndAck(consumer, 4);
            Scenarios.settle();
            a.close();
            b.close();
            c.close();
            consumer.close();
        }
    }

    private static Producer<byte[]> producer(PulsarClient client, String topic, String name)
            throws Exception {
        return client.newProducer().topic(topic).producerName(name).enableBatching(false).create();
    }
}
