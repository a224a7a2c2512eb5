package batch

import (
	"bytes"
	"runtime"
)

// bubbleMark is how the runtime names a testing/synctest bubble in a
// goroutine's traceback header: "goroutine 7 [running, synctest bubble 1]:".
var bubbleMark = []byte(", synctest bubble ")

// inSynctestBubble reports whether the calling goroutine belongs to a
// testing/synctest bubble.
//
// The codec pools need to know: a zstd decoder or encoder holds a channel,
// a channel made inside a bubble belongs to that bubble, and touching it
// from outside is a fatal error ("receive on synctest channel from outside
// bubble"), so a codec made inside a bubble must never reach a pool the
// rest of the process draws from. The runtime has no API for the question;
// the bubble shows only in the goroutine's traceback header, which is what
// this reads. It is asked only when a pool makes a new codec, not per call.
// TestInSynctestBubble fails if a Go release changes the header.
func inSynctestBubble() bool {
	var buf [256]byte
	hdr := buf[:runtime.Stack(buf[:], false)]
	if i := bytes.IndexByte(hdr, '\n'); i >= 0 {
		hdr = hdr[:i]
	}
	return bytes.Contains(hdr, bubbleMark)
}
