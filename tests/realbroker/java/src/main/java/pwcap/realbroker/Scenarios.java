package pwcap.realbroker;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.PulsarVersion;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TypedMessageBuilder;

/**
 * Entry point: {@code Scenarios NAME SERVICE_URL ADMIN_URL TOPIC_PREFIX RECORD_JSON}.
 * Runs one capture scenario with the real Java client against the real broker and writes
 * the client's record. Each scenario closes everything it opened, so the capture ends with
 * the connections' own teardown.
 */
public final class Scenarios {
    static final int RECEIVE_TIMEOUT_MS = 15_000;

    final String serviceUrl;
    final String adminUrl;
    final String prefix;
    final Record record = new Record();

    Scenarios(String serviceUrl, String adminUrl, String prefix) {
        this.serviceUrl = serviceUrl;
        this.adminUrl = adminUrl;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: Scenarios NAME SERVICE_URL ADMIN_URL TOPIC_PREFIX RECORD_JSON");
            System.exit(2);
        }
        Scenarios s = new Scenarios(args[1], args[2], args[3]);
        switch (args[0]) {
            case "key_shared" -> new KeyShared(s).run();
            case "key_shared_sticky" -> new KeySharedSticky(s).run();
            case "redelivery" -> new Redelivery(s).run();
            case "batch_index_ack" -> new BatchIndexAck(s).run();
            case "delayed" -> new Delayed(s).run();
            case "chunked" -> new Chunked(s).run();
            case "transaction" -> new Transactions(s).run();
            case "pattern" -> new Pattern(s).run();
            case "schema" -> new SchemaScenario(s).run();
            case "unload" -> new Unload(s).run();
            case "slow_consumer" -> new SlowConsumer(s).run();
            case "entry_metadata" -> new EntryMetadata(s).run();
            case "epoch" -> new Epoch(s).run();
            default -> throw new IllegalArgumentException("no scenario " + args[0]);
        }
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("client", "java");
        header.put("client_library", "org.apache.pulsar:pulsar-client");
        header.put("client_version", PulsarVersion.getVersion());
        header.put("java_version", System.getProperty("java.version"));
        header.put("java_vm", System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version"));
        s.record.write(Path.of(args[4]), header);
    }

    PulsarClient client() throws PulsarClientException {
        return client(false);
    }

    PulsarClient client(boolean transactions) throws PulsarClientException {
        return PulsarClient.builder()
                .serviceUrl(serviceUrl)
                .operationTimeout(30, TimeUnit.SECONDS)
                .enableTransaction(transactions)
                .build();
    }

    String topic(String name) {
        return "persistent://public/default/" + prefix + "-" + name;
    }

    static byte[] payload(int i, int size) {
        StringBuilder text = new StringBuilder();
        while (text.length() < size) {
            text.append(String.format("message %05d ", i));
        }
        return text.substring(0, size).getBytes(StandardCharsets.US_ASCII);
    }

    static Map<String, String> properties(String scenario, int i) {
        Map<String, String> props = new LinkedHashMap<>();
        props.put("scenario", scenario);
        props.put("index", Integer.toString(i));
        return props;
    }

    /** Send synchronously with an explicit sequence id and record it with its assigned id. */
    MessageId send(Producer<byte[]> producer, long sequenceId, byte[] payload, String key,
                   Map<String, String> props) throws PulsarClientException {
        TypedMessageBuilder<byte[]> builder = producer.newMessage()
                .sequenceId(sequenceId).value(payload).properties(props);
        if (key != null) {
            builder.key(key);
        }
        long sendTime = Record.nowMicros();
        MessageId id = builder.send();
        record.sent(producer, sequenceId, payload, key, props, id, sendTime, Map.of());
        return id;
    }

    /** Queue a message (batching); it is recorded when its receipt arrives. */
    CompletableFuture<MessageId> sendAsync(Producer<byte[]> producer, long sequenceId,
                                           byte[] payload, String key, Map<String, String> props) {
        TypedMessageBuilder<byte[]> builder = producer.newMessage()
                .sequenceId(sequenceId).value(payload).properties(props);
        if (key != null) {
            builder.key(key);
        }
        long sendTime = Record.nowMicros();
        return builder.sendAsync().thenApply(id -> {
            record.sent(producer, sequenceId, payload, key, props, id, sendTime, Map.of());
            return id;
        });
    }

    <T> Message<T> receive(Consumer<T> consumer) throws PulsarClientException {
        Message<T> message = consumer.receive(RECEIVE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        if (message == null) {
            throw new IllegalStateException(consumer.getConsumerName() + ": nothing received");
        }
        return message;
    }

    <T> void ack(Consumer<T> consumer, Message<T> message) throws PulsarClientException {
        consumer.acknowledge(message);
        record.received(consumer, message, "ack");
        record.ack(consumer, message.getMessageId(), "individual", null);
    }

    <T> void receiveAndAck(Consumer<T> consumer, int count) throws PulsarClientException {
        for (int i = 0; i < count; i++) {
            ack(consumer, receive(consumer));
        }
    }

    /** Receive and ack until nothing has come for {@code quietMs}. */
    <T> void ackUntilQuiet(Consumer<T> consumer, int quietMs) throws PulsarClientException {
        Message<T> message;
        while ((message = consumer.receive(quietMs, TimeUnit.MILLISECONDS)) != null) {
            ack(consumer, message);
        }
    }

    /** Receive {@code count} messages from whichever of the consumers has one, acking each. */
    void drainAndAck(List<Consumer<byte[]>> consumers, int count) throws PulsarClientException {
        long deadline = System.currentTimeMillis() + RECEIVE_TIMEOUT_MS;
        int got = 0;
        while (got < count) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("received " + got + " of " + count);
            }
            for (Consumer<byte[]> consumer : consumers) {
                Message<byte[]> message = consumer.receive(50, TimeUnit.MILLISECONDS);
                if (message != null) {
                    ack(consumer, message);
                    got++;
                }
            }
        }
    }

    ConsumerBuilder<byte[]> consumer(PulsarClient client, String topic, String subscription,
                                     String name, SubscriptionType type) {
        return client.newConsumer().topic(topic).subscriptionName(subscription).consumerName(name)
                .subscriptionType(type)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest);
    }

    /** Unload a topic through the admin REST API, as {@code pulsar-admin topics unload} does. */
    void unload(String topic) throws Exception {
        String path = topic.replace("persistent://", "/admin/v2/persistent/") + "/unload";
        HttpRequest request = HttpRequest.newBuilder(URI.create(adminUrl + path))
                .PUT(HttpRequest.BodyPublishers.noBody()).build();
        HttpResponse<String> response = HttpClient.newHttpClient()
                .send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() / 100 != 2) {
            throw new IllegalStateException("unload " + topic + ": " + response.statusCode()
                    + " " + response.body());
        }
        record.event("unload", Map.of("topic", topic, "status", response.statusCode()));
    }

    /** The message's index inside its batch (-1 outside a batch). */
    static int idOfBatch(Message<?> message) {
        return ((org.apache.pulsar.client.api.MessageIdAdv) message.getMessageId()).getBatchIndex();
    }

    /** Let grouped acknowledgements (100 ms by default) reach the wire before closing. */
    static void settle() throws InterruptedException {
        Thread.sleep(500);
    }

    static <T> List<T> listOf(T... items) {
        return new ArrayList<>(List.of(items));
    }
}
