// Command dumplog prints and checks Kafka partition logs, the files partlog
// and Apache Kafka write, like Kafka's kafka-dump-log.sh:
//
//	go run ./examples/dumplog [flags] PATH...
//
// PATH is a segment file (NNNNNNNNNNNNNNNNNNNN.log, .index or .timeindex),
// a partition directory ("<topic>-<partition>", holding segments) or a log
// directory holding partition directories. Flags may come before or after
// the paths:
//
//	--records   print every record: offset, timestamp, key, value, headers
//	            (printable text quoted, anything else in hex; control records
//	            decoded)
//	--index     print the entries of the .index and .timeindex files
//	--verify    check and report problems, exit status 1 if there is one:
//	            every batch's framing, CRC-32C and record framing; offset
//	            continuity (batches never overlap or go backwards, inside a
//	            segment and across the segments of a partition; gaps are
//	            reported as info, since compaction leaves them); every
//	            offset index entry points at the start of a batch and names
//	            an offset inside it or a later batch (Kafka before 4.0 indexes
//	            a follower's append of many batches so), entries increase;
//	            every time index entry names an offset inside a batch of the
//	            segment whose max timestamp is the entry's timestamp, entries
//	            increase. The
//	            .log is walked with segment.Check, the walk recovery uses:
//	            an entry that frames but fails a check is reported and the
//	            dump goes on after it; where the bytes stop framing, the
//	            damage is named as recovery classifies it (a torn tail it
//	            would truncate, corruption followed by valid batches, or
//	            legacy data it refuses to cut)
//	--offsets-decoder  with --records, decode keys and values of
//	            __consumer_offsets records (Kafka's offset-commit schema:
//	            key versions 0-1, value versions 0-3; group metadata keys
//	            are named, their values shown raw)
//	--quiet     with --verify, print only problems and the summary
//	--progress  always report progress on stderr (it is shown anyway once
//	            a run takes more than a second)
//	--max-value N  print at most N bytes of a key, value or header (default 256;
//	            0 = everything)
//
// dumplog only reads: it opens every file read-only and never creates,
// repairs, truncates or rebuilds anything, so it is safe on the directory of a
// running broker (a segment being appended may then show a partial batch at
// its end) and on evidence after a crash. A preallocated index of an active
// segment (zeros past its entries) is read up to its first empty slot, as
// Kafka's tool does.
//
// Exit status: 0 when everything was read (and, with --verify, no problem was
// found), 1 when --verify found a problem, 2 for usage or I/O errors.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// options are the command's flags.
type options struct {
	records  bool
	offsets  bool
	index    bool
	verify   bool
	quiet    bool
	progress bool
	maxValue int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command: it parses args, dumps every path to stdout
// and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("dumplog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.records, "records", false, "print every record")
	fs.BoolVar(&o.index, "index", false, "print index entries")
	fs.BoolVar(&o.offsets, "offsets-decoder", false, "with --records: decode __consumer_offsets keys and values")
	fs.BoolVar(&o.verify, "verify", false, "check CRCs, index consistency and offset continuity; exit 1 on a problem")
	fs.BoolVar(&o.quiet, "quiet", false, "with --verify: print only problems and the summary")
	fs.BoolVar(&o.progress, "progress", false, "always report progress on stderr")
	fs.IntVar(&o.maxValue, "max-value", 256, "print at most this many bytes of a key, value or header (0 = all)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dumplog [--records] [--index] [--verify] [--quiet] PATH...")
		fs.PrintDefaults()
	}
	// Let flags follow the paths, as kafka-dump-log users expect.
	var flags, paths []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			paths = append(paths, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			if (strings.TrimLeft(a, "-") == "max-value") && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			paths = append(paths, a)
		}
	}
	if err := fs.Parse(flags); err != nil {
		return 2
	}
	if len(paths) == 0 {
		fs.Usage()
		return 2
	}
	d := newDumper(o, stdout, stderr)
	for _, p := range paths {
		if err := d.dumpPath(p); err != nil {
			fmt.Fprintf(stderr, "dumplog: %v\n", err)
			return 2
		}
	}
	return d.finish()
}
