package pwcap.realbroker;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Acknowledgement of single messages inside batches (ack_set): two batches of ten; the first
 * consumer acks the even batch indexes and asks for the rest again, acks half of what comes
 * back and leaves; the second consumer gets the entries again with the broker's ack_set
 * naming what is still unacknowledged, and acks the remainder.
 */
final class BatchIndexAck {
    private final Scenarios s;

    BatchIndexAck(Scenarios s) {
        this.s = s;
    }

    void run() throws Exception {
        String topic = s.topic("batch-ack");
        try (PulsarClient client = s.client()) {
            Consumer<byte[]> first = s.consumer(client, topic, "bia-sub", "bia-1",
                    SubscriptionType.Shared).enableBatchIndexAcknowledgment(true).subscribe();
            Producer<byte[]> producer = client.newProducer().topic(topic)
                    .producerName("bia-producer").enableBatching(true)
                    .batchingMaxMessages(10).batchingMaxPublishDelay(200, TimeUnit.MILLISECONDS)
                    .create();
            List<CompletableFuture<MessageId>> pending = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                pending.add(s.sendAsync(producer, i, Scenarios.payload(i, 60), "key-" + (i % 3),
                        Scenarios.properties("batch_index_ack", i)));
            }
            CompletableFuture.allOf(pending.toArray(new CompletableFuture[0])).get();

            int acked = 0;
            for (int i = 0; i < 20; i++) {
                Message<byte[]> message = s.receive(first);
                if (Scenarios.idOfBatch(message) % 2 == 0) {
                    s.ack(first, message);
                    acked++;
                } else {
                    s.record.received(first, message, "none");
                }
            }
            Scenarios.settle();
            first.redeliverUnacknowledgedMessages();
            s.record.event("redeliver_unacknowledged", java.util.Map.of("consumer_name", "bia-1"));
            for (int i = 0; i < 10; i++) {
                Message<byte[]> message = s.receive(first);
                if (Scenarios.idOfBatch(message) % 4 == 1) {
                    s.ack(first, message);
                    acked++;
                } else {
                    s.record.received(first, message, "none");
                }
            }
            Scenarios.settle();
            first.close();
            Consumer<byte[]> second = s.consumer(client, topic, "bia-sub", "bia-2",
                    SubscriptionType.Shared).enableBatchIndexAcknowledgment(true).subscribe();
            s.receiveAndAck(second, 20 - acked);
            Scenarios.settle();
            producer.close();
            second.close();
        }
    }
}
