// Command scenarios runs one capture scenario with the real Go client
// (github.com/apache/pulsar-client-go) against the real broker and writes the client's
// record: scenarios NAME SERVICE_URL ADMIN_URL TOPIC_PREFIX RECORD_JSON.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

const clientModule = "github.com/apache/pulsar-client-go"

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: scenarios NAME SERVICE_URL ADMIN_URL TOPIC_PREFIX RECORD_JSON")
		os.Exit(2)
	}
	s := &scenario{serviceURL: os.Args[2], adminURL: os.Args[3], prefix: os.Args[4], record: &Record{}}
	runs := map[string]func() error{
		"key_shared":      s.keyShared,
		"redelivery":      s.redelivery,
		"batch_index_ack": s.batchIndexAck,
		"chunked":         s.chunked,
		"transaction":     s.transaction,
		"slow_consumer":   s.slowConsumer,
	}
	run, ok := runs[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "no scenario", os.Args[1])
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
		os.Exit(1)
	}
	header := map[string]any{
		"client":         "go",
		"client_library": clientModule,
		"client_version": clientVersion(),
		"go_version":     runtime.Version(),
	}
	if err := s.record.write(os.Args[5], header); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func clientVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == clientModule {
			return dep.Version
		}
	}
	return "unknown"
}
