package pwcap.realbroker;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Redelivery three ways on one topic: a subscription whose consumer never acks the first
 * delivery (the client's ack timeout asks the broker to redeliver), a subscription that
 * negatively acknowledges the even messages until they reach the dead-letter topic after two
 * redeliveries, and a consumer of that dead-letter topic.
 */
final class Redelivery {
    static final int COUNT = 6;
    private final Scenarios s;

    Redelivery(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("redeliver");
        String deadLetter = s.topic("redeliver-dlq");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> timeout = s.consumer(client, topic, "ack-timeout-sub", "ack-timeout",
                    SubscriptionType.Shared)
                    .ackTimeout(1, TimeUnit.SECONDS).ackTimeoutTickTime(100, TimeUnit.MILLISECONDS)
                    .subscribe();
            Consumer<byte[]> nack = s.consumer(client, topic, "nack-sub", "nack",
                    SubscriptionType.Shared)
                    .negativeAckRedeliveryDelay(300, TimeUnit.MILLISECONDS)
                    .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2)
                            .deadLetterTopic(deadLetter).build())
                    .subscribe();
            Consumer<byte[]> dlq = s.consumer(client, deadLetter, "dlq-sub", "dlq-reader",
                    SubscriptionType.Exclusive).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("redeliver-producer").enableBatching(false).create();
            for (int i = 0; i < COUNT; i++) {
                s.send(producer, i, Scenarios.payload(i, 80), "key-" + i,
                        Scenarios.properties("redelivery", i));
            }

            for (int i = 0; i < COUNT; i++) {  // first delivery: held past the ack timeout
                s.record.received(timeout, s.receive(timeout), "none");
            }
            s.receiveAndAck(timeout, COUNT);  // the redelivery, acked

            // Even messages: nacked at each of the 3 deliveries, then dead-lettered.
            int expected = COUNT / 2 + (COUNT / 2) * 3;
            for (int i = 0; i < expected; i++) {
                Message<byte[]> message = s.receive(nack);
                int index = Integer.parseInt(message.getProperty("index"));
                if (index % 2 == 1) {
                    s.ack(nack, message);
                } else {
                    nack.negativeAcknowledge(message);
                    s.record.received(nack, message, "nack");
                }
            }
            s.receiveAndAck(dlq, COUNT / 2);
            Scenarios.settle();
            producer.close();
            timeout.close();
            nack.close();
            dlq.close();
            s.record.event("closed", Map.of());
        }
    }
}
