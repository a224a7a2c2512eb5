package batch

import (
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// A codec used inside a testing/synctest bubble (a user testing their
// server with synctest) leaves nothing in the package's codec pools that
// belongs to the bubble: a zstd decoder or encoder holds a channel, and a
// channel made inside a bubble is fatal to touch from outside it. Before
// the pools dropped what was made in a bubble, the use outside the bubble
// died with "receive on synctest channel from outside bubble".
func TestCodecsOutlastSynctestBubble(t *testing.T) {
	var built []Batch
	for _, c := range allCodecs {
		built = append(built, build(t, BuilderOptions{Compression: c}, numbered(50, 1)...))
	}
	read := func(t *testing.T) {
		for _, b := range built {
			var dec Decoder
			require.NoError(t, dec.Validate(b), "%s", b.Attributes().Compression())
			require.Equal(t, 50, iterateAll(b, &dec), "%s", b.Attributes().Compression())
		}
	}
	write := func(t *testing.T) {
		for _, c := range allCodecs {
			build(t, BuilderOptions{Compression: c}, numbered(50, 1)...)
		}
	}
	for _, tc := range []struct {
		name string
		use  func(t *testing.T)
	}{
		{"decoders", read},
		{"encoders", write},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One P and two collections: the pools are empty, so the
			// bubble makes fresh codecs, and one it puts back sits where
			// the next Get on this goroutine's P finds it.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			runtime.GC()
			runtime.GC()
			synctest.Test(t, tc.use)
			tc.use(t)
		})
	}
}

// inSynctestBubble tells the goroutines of a bubble from those outside it.
func TestInSynctestBubble(t *testing.T) {
	require.False(t, inSynctestBubble())
	synctest.Test(t, func(t *testing.T) {
		require.True(t, inSynctestBubble())
		done := make(chan bool)
		go func() { done <- inSynctestBubble() }()
		require.True(t, <-done, "a goroutine started in the bubble")
	})
	done := make(chan bool)
	go func() { done <- inSynctestBubble() }()
	require.False(t, <-done, "a goroutine outside any bubble")
}
