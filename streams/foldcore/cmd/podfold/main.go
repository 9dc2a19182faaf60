// Command podfold is the native fold core of `podledger fold`: JSON lines of journal entries or
// ingress values in (a file, or standard input), pod-status-history values out on standard output,
// byte for byte what the Python fold prints. Its last line on standard error is a JSON summary.
//
// Exit status 3 means the input holds something this port does not cover (a line the fold would
// dead-letter, events held for a pod not announced yet, a float, ...): the caller discards the
// output and folds the input with the Python fold.
//
// With --serve it is the live fold worker's core instead: it answers the requests of the protocol
// in streams/foldcore/serve.go on standard input and output until standard input ends (exit 0);
// a request it cannot read makes it exit 1.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"podledger/foldcore"
)

const exitGaveUp = 3

func main() {
	progress := flag.Bool("progress", false, "report progress on standard error every 100,000 lines")
	serve := flag.Bool("serve", false, "fold the live fold worker's batches (requests on standard input)")
	maxEventBytes := flag.Int("max-event-bytes", foldcore.DefaultMaxEventBytes,
		"with --serve: the largest input value folded (0: no limit)")
	holdMaxEvents := flag.Int("hold-max-events", foldcore.DefaultHoldMaxEvents,
		"with --serve: the most events a pod not announced yet holds (HoldLimits.max_events)")
	parsedRecords := flag.Int("parsed-records", foldcore.DefaultParsedRecords,
		"with --serve: how many records stay parsed, the most recently used (the last batch's always do; 0: only those)")
	topicPrefix := flag.String("topic-prefix", "", "with --serve: the deployment's topic prefix, which sealed status versions name (ce_source)")
	recordBatchBytes := flag.Int("record-batch-bytes", foldcore.DefaultRecordBatchBytes,
		"with --serve: the most a sealed answer's Kafka record batch holds")
	windowBytes := flag.Int("window-bytes", foldcore.DefaultWindowBytes,
		"the input folded at a time, pod by pod (1 MiB to 1 GiB); its history is held until written")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: podfold [--progress] [--window-bytes N] [FILE]\n       podfold --serve [--max-event-bytes N] [--hold-max-events N] [--parsed-records N]\n                [--topic-prefix P] [--record-batch-bytes N]")
	}
	flag.Parse()
	if *serve {
		if flag.NArg() > 0 || *maxEventBytes < 0 || *parsedRecords < 0 || *recordBatchBytes < 1024 {
			flag.Usage()
			os.Exit(2)
		}
		paceServeGC()
		server := foldcore.NewServer(*maxEventBytes)
		server.HoldMaxEvents = *holdMaxEvents
		server.ParsedRecords = *parsedRecords
		server.RecordBatchBytes = *recordBatchBytes
		server.SetTopicPrefix(*topicPrefix)
		widenPipe(os.Stdin)
		widenPipe(os.Stdout)
		if err := server.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "podfold:", err)
			os.Exit(1)
		}
		return
	}
	var in io.Reader = os.Stdin
	if flag.NArg() > 1 || *windowBytes < foldcore.MinWindowBytes || *windowBytes > foldcore.MaxWindowBytes {
		flag.Usage()
		os.Exit(2)
	}
	if flag.NArg() == 1 && flag.Arg(0) != "-" {
		file, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "podfold:", err)
			os.Exit(1)
		}
		defer file.Close()
		in = file
	}
	paceGC()
	started := time.Now()
	var report func(int64)
	if *progress {
		report = func(lines int64) { fmt.Fprintf(os.Stderr, "podfold: %d lines ...\n", lines) }
	}
	stats, err := foldcore.Replay(in, os.Stdout, foldcore.ReplayOptions{Progress: report, WindowBytes: *windowBytes})
	var gaveUp *foldcore.GaveUp
	if errors.As(err, &gaveUp) {
		fmt.Fprintln(os.Stderr, "podfold: not covered:", gaveUp.Error())
		os.Exit(exitGaveUp)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "podfold:", err)
		os.Exit(1)
	}
	summary, _ := json.Marshal(struct {
		foldcore.Stats
		Seconds float64 `json:"seconds"`
	}{stats, time.Since(started).Seconds()})
	fmt.Fprintln(os.Stderr, string(summary))
}
