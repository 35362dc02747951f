package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

const receiveTimeout = 15 * time.Second

type scenario struct {
	serviceURL string
	adminURL   string
	prefix     string
	record     *Record
}

// namedConsumer pairs a consumer with the name it subscribed with (the Go consumer does
// not report its own name).
type namedConsumer struct {
	pulsar.Consumer
	name string
}

func (s *scenario) client(transactions bool) (pulsar.Client, error) {
	quiet := slog.New(slog.NewTextHandler(nilWriter{}, nil))
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:               s.serviceURL,
		OperationTimeout:  30 * time.Second,
		EnableTransaction: transactions,
		Logger:            plog.NewLoggerWithSlog(quiet),
	})
}

type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }

func (s *scenario) topic(name string) string {
	return "persistent://public/default/" + s.prefix + "-" + name
}

func payload(i, size int) []byte {
	var text strings.Builder
	for text.Len() < size {
		fmt.Fprintf(&text, "message %05d ", i)
	}
	return []byte(text.String()[:size])
}

func properties(scenario string, i int) map[string]string {
	return map[string]string{"scenario": scenario, "index": strconv.Itoa(i)}
}

func (s *scenario) subscribe(c pulsar.Client, opts pulsar.ConsumerOptions) (*namedConsumer, error) {
	opts.SubscriptionInitialPosition = pulsar.SubscriptionPositionEarliest
	consumer, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	return &namedConsumer{consumer, opts.Name}, nil
}

// send publishes synchronously with an explicit sequence id and records the assigned id.
func (s *scenario) send(p pulsar.Producer, seq int64, msg *pulsar.ProducerMessage, extra map[string]any) error {
	msg.SequenceID = &seq
	start := nowMicros()
	id, err := p.Send(context.Background(), msg)
	if err != nil {
		return err
	}
	s.record.sent(p, seq, msg, id, start, extra)
	return nil
}

// sendAsync queues a message (batching); it is recorded when its receipt arrives.
func (s *scenario) sendAsync(p pulsar.Producer, seq int64, msg *pulsar.ProducerMessage, done *sync.WaitGroup, failed *error) {
	msg.SequenceID = &seq
	start := nowMicros()
	done.Add(1)
	p.SendAsync(context.Background(), msg, func(id pulsar.MessageID, m *pulsar.ProducerMessage, err error) {
		defer done.Done()
		if err != nil {
			*failed = err
			return
		}
		s.record.sent(p, seq, m, id, start, nil)
	})
}

func receive(c *namedConsumer) (pulsar.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), receiveTimeout)
	defer cancel()
	msg, err := c.Receive(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	return msg, nil
}

func (s *scenario) ack(c *namedConsumer, msg pulsar.Message) error {
	if err := c.Ack(msg); err != nil {
		return err
	}
	s.record.received(c, c.name, msg, "ack")
	s.record.ack(c, c.name, msg, "")
	return nil
}

func (s *scenario) receiveAndAck(c *namedConsumer, count int) error {
	for i := 0; i < count; i++ {
		msg, err := receive(c)
		if err != nil {
			return err
		}
		if err := s.ack(c, msg); err != nil {
			return err
		}
	}
	return nil
}

// drainAndAck receives count messages from whichever consumer has one, acking each.
func (s *scenario) drainAndAck(consumers []*namedConsumer, count int) error {
	deadline := time.Now().Add(receiveTimeout)
	got := 0
	for got < count {
		if time.Now().After(deadline) {
			return fmt.Errorf("received %d of %d", got, count)
		}
		for _, c := range consumers {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			msg, err := c.Receive(ctx)
			cancel()
			if err == nil {
				if err := s.ack(c, msg); err != nil {
					return err
				}
				got++
			}
		}
	}
	return nil
}

// settle lets grouped acknowledgements (100 ms by default) reach the wire before closing.
func settle() { time.Sleep(500 * time.Millisecond) }

// keyShared: an auto-split Key_Shared subscription fed by a key-based batching producer;
// a second consumer joins after the first round of keys and leaves before the last.
func (s *scenario) keyShared() error {
	c, err := s.client(false)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := s.topic("keys")
	first, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ks-auto",
		Name: "go-ks-1", Type: pulsar.KeyShared, ReceiverQueueSize: 20})
	if err != nil {
		return err
	}
	producer, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-ks-producer",
		BatcherBuilderType: pulsar.KeyBasedBatchBuilder, BatchingMaxMessages: 8,
		BatchingMaxPublishDelay: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	seq := 0
	publish := func(n int) error {
		var done sync.WaitGroup
		var failed error
		for i := 0; i < n; i, seq = i+1, seq+1 {
			s.sendAsync(producer, int64(seq), &pulsar.ProducerMessage{Payload: payload(seq, 100),
				Key: fmt.Sprintf("key-%d", seq%8), Properties: properties("key_shared", seq)}, &done, &failed)
		}
		done.Wait()
		return failed
	}
	if err := publish(24); err != nil {
		return err
	}
	if err := s.receiveAndAck(first, 24); err != nil {
		return err
	}
	second, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ks-auto",
		Name: "go-ks-2", Type: pulsar.KeyShared, ReceiverQueueSize: 20})
	if err != nil {
		return err
	}
	s.record.event("consumer_joined", map[string]any{"consumer_name": "go-ks-2"})
	if err := publish(24); err != nil {
		return err
	}
	if err := s.drainAndAck([]*namedConsumer{first, second}, 24); err != nil {
		return err
	}
	settle()
	second.Close()
	s.record.event("consumer_left", map[string]any{"consumer_name": "go-ks-2"})
	if err := publish(16); err != nil {
		return err
	}
	if err := s.receiveAndAck(first, 16); err != nil {
		return err
	}
	settle()
	producer.Close()
	first.Close()
	return nil
}

// redelivery: even messages are negatively acknowledged at every delivery until the client
// moves them to the dead-letter topic (three deliveries); a consumer there reads them.
func (s *scenario) redelivery() error {
	c, err := s.client(false)
	if err != nil {
		return err
	}
	defer c.Close()
	topic, deadLetter := s.topic("redeliver"), s.topic("redeliver-dlq")
	nack, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "nack-sub",
		Name: "go-nack", Type: pulsar.Shared, NackRedeliveryDelay: 300 * time.Millisecond,
		DLQ: &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: deadLetter}})
	if err != nil {
		return err
	}
	dlq, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: deadLetter, SubscriptionName: "dlq-sub",
		Name: "go-dlq-reader", Type: pulsar.Exclusive})
	if err != nil {
		return err
	}
	producer, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-redeliver-producer",
		DisableBatching: true})
	if err != nil {
		return err
	}
	const count = 6
	for i := 0; i < count; i++ {
		if err := s.send(producer, int64(i), &pulsar.ProducerMessage{Payload: payload(i, 80),
			Key: fmt.Sprintf("key-%d", i), Properties: properties("redelivery", i)}, nil); err != nil {
			return err
		}
	}
	for i := 0; i < count/2+(count/2)*3; i++ {
		msg, err := receive(nack)
		if err != nil {
			return err
		}
		index, _ := strconv.Atoi(msg.Properties()["index"])
		if index%2 == 1 {
			if err := s.ack(nack, msg); err != nil {
				return err
			}
		} else {
			nack.Nack(msg)
			s.record.received(nack, nack.name, msg, "nack")
		}
	}
	if err := s.receiveAndAck(dlq, count/2); err != nil {
		return err
	}
	settle()
	producer.Close()
	nack.Close()
	dlq.Close()
	return nil
}

// batchIndexAck: two batches of ten; the first consumer acks the even batch indexes and
// leaves, the second gets the entries again with the broker's ack_set and acks the rest.
func (s *scenario) batchIndexAck() error {
	c, err := s.client(false)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := s.topic("batch-ack")
	first, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "bia-sub",
		Name: "go-bia-1", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true})
	if err != nil {
		return err
	}
	producer, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-bia-producer",
		BatchingMaxMessages: 10, BatchingMaxPublishDelay: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	var done sync.WaitGroup
	var failed error
	for i := 0; i < 20; i++ {
		s.sendAsync(producer, int64(i), &pulsar.ProducerMessage{Payload: payload(i, 60),
			Key: fmt.Sprintf("key-%d", i%3), Properties: properties("batch_index_ack", i)}, &done, &failed)
	}
	done.Wait()
	if failed != nil {
		return failed
	}
	acked := 0
	for i := 0; i < 20; i++ {
		msg, err := receive(first)
		if err != nil {
			return err
		}
		if msg.ID().BatchIdx()%2 == 0 {
			if err := s.ack(first, msg); err != nil {
				return err
			}
			acked++
		} else {
			s.record.received(first, first.name, msg, "none")
		}
	}
	settle()
	first.Close()
	s.record.event("consumer_left", map[string]any{"consumer_name": "go-bia-1"})
	second, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "bia-sub",
		Name: "go-bia-2", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true})
	if err != nil {
		return err
	}
	if err := s.receiveAndAck(second, 20-acked); err != nil {
		return err
	}
	settle()
	producer.Close()
	second.Close()
	return nil
}

// chunked: three 70 kB messages cut into 20 kB chunks between two small ones.
func (s *scenario) chunked() error {
	c, err := s.client(false)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := s.topic("chunked")
	consumer, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "chunked-sub",
		Name: "go-chunked-consumer", Type: pulsar.Exclusive})
	if err != nil {
		return err
	}
	producer, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-chunked-producer",
		DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 20_000})
	if err != nil {
		return err
	}
	for i := 0; i < 5; i++ {
		size := 70_000
		if i == 0 || i == 4 {
			size = 300
		}
		if err := s.send(producer, int64(i), &pulsar.ProducerMessage{Payload: payload(i, size),
			Key: fmt.Sprintf("key-%d", i), Properties: properties("chunked", i)}, nil); err != nil {
			return err
		}
	}
	if err := s.receiveAndAck(consumer, 5); err != nil {
		return err
	}
	settle()
	producer.Close()
	consumer.Close()
	return nil
}

// transaction: each transaction acks three input messages and produces three to the output
// topic; the first commits, the second aborts (its inputs come back and are acked plainly).
func (s *scenario) transaction() error {
	c, err := s.client(true)
	if err != nil {
		return err
	}
	defer c.Close()
	input, output := s.topic("txn-in"), s.topic("txn-out")
	in, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: input, SubscriptionName: "txn-in-sub",
		Name: "go-txn-in", Type: pulsar.Shared})
	if err != nil {
		return err
	}
	out, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: output, SubscriptionName: "txn-out-sub",
		Name: "go-txn-out", Type: pulsar.Exclusive})
	if err != nil {
		return err
	}
	source, err := c.CreateProducer(pulsar.ProducerOptions{Topic: input, Name: "go-txn-source", DisableBatching: true})
	if err != nil {
		return err
	}
	sink, err := c.CreateProducer(pulsar.ProducerOptions{Topic: output, Name: "go-txn-sink",
		DisableBatching: true, SendTimeout: -1})
	if err != nil {
		return err
	}
	for i := 0; i < 6; i++ {
		if err := s.send(source, int64(i), &pulsar.ProducerMessage{Payload: payload(i, 70),
			Properties: properties("txn-in", i)}, nil); err != nil {
			return err
		}
	}
	produced := 0
	for _, outcome := range []string{"commit", "abort"} {
		txn, err := c.NewTransaction(time.Minute)
		if err != nil {
			return err
		}
		id := txn.GetTxnID()
		txnID := fmt.Sprintf("(%d,%d)", id.MostSigBits, id.LeastSigBits)
		s.record.event("txn_open", map[string]any{"txn": txnID})
		for i := 0; i < 3; i, produced = i+1, produced+1 {
			msg, err := receive(in)
			if err != nil {
				return err
			}
			if err := in.AckWithTxn(msg, txn); err != nil {
				return err
			}
			s.record.received(in, in.name, msg, "ack")
			s.record.ack(in, in.name, msg, txnID)
			if err := s.send(sink, int64(produced), &pulsar.ProducerMessage{Payload: payload(100+produced, 70),
				Properties: properties("txn-out", produced), Transaction: txn},
				map[string]any{"txn": txnID, "outcome": outcome}); err != nil {
				return err
			}
		}
		if outcome == "commit" {
			err = txn.Commit(context.Background())
		} else {
			err = txn.Abort(context.Background())
		}
		if err != nil {
			return err
		}
		s.record.event("txn_"+outcome, map[string]any{"txn": txnID})
	}
	if err := s.receiveAndAck(out, 3); err != nil {
		return err
	}
	// The aborted acks are undone: the broker redelivers those inputs.
	if err := s.receiveAndAck(in, 3); err != nil {
		return err
	}
	settle()
	source.Close()
	sink.Close()
	in.Close()
	out.Close()
	return nil
}

// slowConsumer: a ten-message receiver queue, 100 ms per message, sixty waiting.
func (s *scenario) slowConsumer() error {
	c, err := s.client(false)
	if err != nil {
		return err
	}
	defer c.Close()
	topic := s.topic("slow")
	consumer, err := s.subscribe(c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow-sub",
		Name: "go-slow-consumer", Type: pulsar.Shared, ReceiverQueueSize: 10})
	if err != nil {
		return err
	}
	producer, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "go-slow-producer",
		DisableBatching: true})
	if err != nil {
		return err
	}
	for i := 0; i < 60; i++ {
		if err := s.send(producer, int64(i), &pulsar.ProducerMessage{Payload: payload(i, 120),
			Properties: properties("slow", i)}, nil); err != nil {
			return err
		}
	}
	for i := 0; i < 60; i++ {
		msg, err := receive(consumer)
		if err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
		if err := s.ack(consumer, msg); err != nil {
			return err
		}
	}
	settle()
	producer.Close()
	consumer.Close()
	return nil
}
