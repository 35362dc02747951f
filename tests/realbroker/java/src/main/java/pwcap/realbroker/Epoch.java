package pwcap.realbroker;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.ConsumerBase;

/**
 * A Failover consumer takes ten messages without acknowledging them, then asks for every
 * unacknowledged message again: on an Exclusive or Failover subscription the Java client
 * moves to a new consumer epoch for it (the request carries it, and the client drops what
 * it held of the old one), and the broker delivers the ten again. It acknowledges those.
 * The record's {@code consumer_epoch} event holds the client's epoch before and after.
 */
final class Epoch {
    static final int COUNT = 10;
    private final Scenarios s;

    Epoch(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("epoch");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> consumer = s.consumer(client, topic, "java-epoch-sub",
                    "java-epoch-consumer", SubscriptionType.Failover).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("java-epoch-producer").enableBatching(false).create();
            for (int i = 0; i < COUNT; i++) {
                s.send(producer, i, Scenarios.payload(i, 80), null,
                        Scenarios.properties("epoch", i));
            }
            for (int i = 0; i < COUNT; i++) {
                s.record.received(consumer, s.receive(consumer), "none");
            }
            ConsumerBase<byte[]> base = (ConsumerBase<byte[]>) consumer;
            long before = base.getConsumerEpoch();
            consumer.redeliverUnacknowledgedMessages();
            Map<String, Object> moved = new LinkedHashMap<>();
            moved.put("consumer_name", consumer.getConsumerName());
            moved.put("before", before);
            moved.put("after", base.getConsumerEpoch());
            s.record.event("consumer_epoch", moved);
            s.receiveAndAck(consumer, COUNT);
            Scenarios.settle();
            producer.close();
            consumer.close();
        }
    }
}
