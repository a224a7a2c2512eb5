package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/pierrec/lz4/v4"
)

// Decompression bounds. A compressed batch is untrusted input: a few
// kilobytes of zstd can claim gigabytes. Decompression stops, with an error
// wrapping ErrCorrupt, as soon as the output passes the limit.
const (
	// defaultMaxDecompressionRatio is the default limit on the decompressed
	// size of a batch's records, as a multiple of their compressed size.
	defaultMaxDecompressionRatio = 64
	// minDecompressionLimit is the smallest default limit: batches of very
	// compressible records (a megabyte of zeros compresses to a few hundred
	// bytes) are legitimate up to this size whatever their ratio. It costs
	// no more memory than the ratio already allows a 1 MiB batch (Kafka's
	// default max.message.bytes).
	minDecompressionLimit = 64 << 20
	// maxZstdWindow bounds the history window a zstd frame may ask for:
	// zstd's default limit (2^27 bytes), the one zstd-jni, Kafka's reader,
	// decodes under. A Java producer at compression.zstd.level 22 streams
	// frames asking for exactly that, whatever the batch's size.
	maxZstdWindow = 128 << 20
)

// Xerial snappy framing, as the Java client writes it: an 8-byte magic, a
// 4-byte version and a 4-byte compatible version (both 1), then chunks,
// each a 4-byte big-endian length and a raw snappy block. Frozen.
const (
	xerialMagic       = "\x82SNAPPY\x00"
	xerialVersionOff  = len(xerialMagic)
	xerialCompatOff   = xerialVersionOff + 4
	xerialHeaderSize  = xerialCompatOff + 4 // 16
	xerialChunkLenLen = 4
	xerialVersion     = 1
	xerialCompat      = 1
	// xerialBlockSize is how many uncompressed bytes each chunk this
	// package writes holds (the Java client's default).
	xerialBlockSize = 32 << 10
)

// Decoder decompresses batches into a reusable buffer and keeps the scratch
// space record iteration needs, so that decoding batch after batch does not
// allocate once the buffers have grown. Decompressors (gzip, lz4, zstd
// readers) come from package-wide pools for the duration of one call.
//
// The zero value is ready to use. A Decoder is not safe for concurrent use:
// give each goroutine its own. Bytes it returns (records of a compressed
// batch) alias its buffer and are valid until its next use.
type Decoder struct {
	// MaxDecompressedSize bounds the decompressed size, in bytes, of one
	// batch's records. Zero means 64 times the
	// compressed size, but at least 64 MiB.
	MaxDecompressedSize int

	buf    []byte         // decompressed records of the last compressed batch
	hdrs   []RecordHeader // header scratch handed to iterators
	legacy []Record       // scratch of LegacyBaseOffset
}

// limit returns the decompression limit for a payload of n bytes.
func (d *Decoder) limit(n int) int {
	if d != nil && d.MaxDecompressedSize > 0 {
		return d.MaxDecompressedSize
	}
	return max(n*defaultMaxDecompressionRatio, minDecompressionLimit)
}

// decompress returns the records region of b: the bytes after the header,
// decompressed when the batch is compressed. For an uncompressed batch the
// result aliases b; otherwise it aliases d's buffer, valid until d's next
// use. It checks neither the CRC nor the record framing.
func (d *Decoder) decompress(b Batch) ([]byte, error) {
	if len(b) < HeaderSize {
		return nil, corruptTruncated(0, "header", "have %d bytes, need %d", len(b), HeaderSize)
	}
	c := b.Attributes().Compression()
	if c == CompressionNone {
		return b[HeaderSize:], nil
	}
	out, err := decompress(d.buf[:0], c, b[HeaderSize:], d.limit(len(b)-HeaderSize))
	d.buf = out[:0]
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decompress appends the decompressed src to dst, failing once the output
// would pass limit bytes.
func decompress(dst []byte, c Compression, src []byte, limit int) ([]byte, error) {
	var err error
	switch c {
	case CompressionGzip:
		g := gzipReaders.Get().(*gzipReader)
		start := len(dst)
		dst, err = g.decode(dst, src, limit)
		gzipReaders.Put(g)
		if err != nil {
			// The pooled reader's Huffman tables are what an earlier
			// stream left (see gzipReader): decode the corrupt stream
			// again with a new reader, for the error it has alone.
			dst, err = new(gzipReader).decode(dst[:start], src, limit)
		}
	case CompressionSnappy:
		dst, err = decodeSnappy(dst, src, limit)
	case CompressionLZ4:
		// What Kafka reads: one frame of independent blocks; bytes after
		// its end mark are not part of the payload.
		n, ferr := legacy.LZ4FrameEnd(src)
		if ferr != nil {
			return dst, corruptf(HeaderSize, fieldRecords, "%s payload is no frame Kafka reads: %v", c, ferr)
		}
		src = src[:n]
		l := lz4Readers.Get().(*lz4Reader)
		l.src.Reset(src)
		l.z.Reset(&l.src)
		dst, err = readLimited(dst, l.z, limit, len(src))
		l.src.Reset(nil)
		l.z.Reset(nil)
		lz4Readers.Put(l)
	case CompressionZstd:
		z := zstdReaders.Get().(*zstdReader)
		z.src.Reset(src)
		if z.z == nil {
			z.z, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderLowmem(true))
			z.bubbled = inSynctestBubble()
		}
		if err == nil {
			if err = z.z.Reset(&z.src); err == nil {
				dst, err = readLimited(dst, z.z, limit, len(src))
			}
			_ = z.z.Reset(nil)
		}
		z.src.Reset(nil)
		if !z.bubbled {
			zstdReaders.Put(z)
		}
	default:
		return dst, corruptf(attributesOffset, "attributes", "unknown compression codec %d", c)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return dst, err
		}
		if errors.Is(err, errTooLarge) {
			return dst, tooLarge(c, limit)
		}
		return dst, corruptf(HeaderSize, fieldRecords, "%s payload does not decompress: %v", c, err)
	}
	return dst, nil
}

// errTooLarge is wrapped by the error for output past the limit.
var errTooLarge = errors.New("decompressed size exceeds the limit")

func tooLarge(c Compression, limit int) error {
	return &CorruptionError{Pos: HeaderSize, Field: fieldRecords,
		Err: fmt.Errorf("%w: %s payload: %w (%d bytes)", ErrCorrupt, c, errTooLarge, limit)}
}

// readLimited appends everything r yields to dst; more than limit bytes is
// an error. hint is the compressed size, for the first allocation.
func readLimited(dst []byte, r io.Reader, limit, hint int) ([]byte, error) {
	start := len(dst)
	if cap(dst)-start < 512 {
		n := min(max(hint*4, 4<<10), limit+1)
		dst = append(dst, make([]byte, n)...)[:start]
	}
	for {
		if len(dst) == cap(dst) {
			if len(dst)-start > limit {
				break
			}
			grow := min(cap(dst)-start, limit+1-(len(dst)-start))
			grow = max(grow, 512)
			dst = append(dst[:cap(dst)], make([]byte, grow)...)[:len(dst)]
		}
		room := dst[len(dst):cap(dst)]
		if extra := start + limit + 1 - len(dst); len(room) > extra {
			room = room[:extra]
		}
		n, err := r.Read(room)
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			break
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, errTooLarge
}

// decodeSnappy decodes a Kafka snappy payload: xerial-framed (the Java
// client) when it starts with the xerial magic, else one raw snappy block
// (librdkafka and most non-Java clients). A xerial payload may hold several
// xerial streams one after the other, each with its header, as snappy-java
// reads them.
func decodeSnappy(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	block := func(chunk []byte, pos int) error {
		n, err := snappy.DecodedLen(chunk)
		if err != nil {
			return corruptf(int64(HeaderSize+pos), fieldRecords, "snappy block: %v", err)
		}
		if n > limit-(len(dst)-start) {
			return tooLarge(CompressionSnappy, limit)
		}
		l := len(dst)
		dst = append(dst, make([]byte, n)...) // no allocation once dst has grown
		if _, err := snappy.Decode(dst[l:], chunk); err != nil {
			dst = dst[:l]
			return corruptf(int64(HeaderSize+pos), fieldRecords, "snappy block: %v", err)
		}
		return nil
	}
	if !isXerial(src) {
		return dst, block(src, 0)
	}
	for pos := xerialHeaderSize; pos < len(src); {
		if len(src)-pos < xerialChunkLenLen {
			return dst, corruptf(int64(HeaderSize+pos), fieldRecords, "xerial snappy chunk length truncated")
		}
		if string(src[pos:pos+xerialChunkLenLen]) == xerialMagic[:xerialChunkLenLen] {
			// Another xerial stream follows, as snappy-java reads a
			// chunk length equal to the magic's head (no chunk is that
			// long: it is negative as Java's int).
			if !isXerial(src[pos:]) {
				return dst, corruptf(int64(HeaderSize+pos), fieldRecords, "xerial snappy header of a further stream is not whole")
			}
			pos += xerialHeaderSize
			continue
		}
		n := int64(binary.BigEndian.Uint32(src[pos:]))
		pos += xerialChunkLenLen
		if n > int64(len(src)-pos) {
			return dst, corruptf(int64(HeaderSize+pos-xerialChunkLenLen), fieldRecords,
				"xerial snappy chunk of %d bytes, %d remain", n, len(src)-pos)
		}
		if err := block(src[pos:pos+int(n)], pos); err != nil {
			return dst, err
		}
		pos += int(n)
	}
	return dst, nil
}

// isXerial reports whether p starts with the xerial snappy header.
func isXerial(p []byte) bool {
	return len(p) >= xerialHeaderSize && string(p[:len(xerialMagic)]) == xerialMagic
}

// gzipReader is a pooled gzip decompressor. klauspost's flate
// decompressor keeps its Huffman tables' memory across Reset and rebuilds
// only the trees a stream defines: a corrupt stream that uses a tree it
// left empty (an empty distance tree is legal) reads the entries an earlier
// stream left there, so where and how it fails depends on what the reader
// decoded before ("corrupt input before offset 4" from a new reader,
// "unexpected length code" after some valid stream). A valid stream never
// reads such an entry, so the pooled reader decodes it as a new one would;
// decompress gives a failure a second decoding with a new reader, whose
// error depends on the stream alone.
type gzipReader struct {
	src bytes.Reader
	z   gzip.Reader
}

// decode appends the decompression of the gzip payload src to dst (see
// readLimited).
func (g *gzipReader) decode(dst, src []byte, limit int) ([]byte, error) {
	g.src.Reset(src)
	err := g.z.Reset(&g.src)
	if err == nil {
		dst, err = readLimited(dst, &g.z, limit, len(src))
	}
	g.src.Reset(nil)
	return dst, err
}

type lz4Reader struct {
	src bytes.Reader
	z   *lz4.Reader
}

type zstdReader struct {
	src bytes.Reader
	z   *zstd.Decoder
	// bubbled: z was made inside a testing/synctest bubble, so its
	// channel belongs to the bubble; it serves its one call and is
	// never pooled (see inSynctestBubble).
	bubbled bool
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	lz4Readers  = sync.Pool{New: func() any { return &lz4Reader{z: lz4.NewReader(nil)} }}
	zstdReaders = sync.Pool{New: func() any { return new(zstdReader) }}
)

// Compression side.

// appendCompressed appends src compressed with c at level (0 = the codec's
// default) to dst.
func appendCompressed(dst []byte, c Compression, level int, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return appendGzip(dst, level, src)
	case CompressionSnappy:
		return appendXerial(dst, src), nil
	case CompressionLZ4:
		return appendLZ4(dst, level, src)
	case CompressionZstd:
		return appendZstd(dst, level, src)
	}
	return dst, fmt.Errorf("partlog/batch: unknown compression codec %d", c)
}

// sliceWriter is an io.Writer that appends to a slice.
type sliceWriter struct{ b []byte }

// Write appends p; it never fails.
func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type gzipWriter struct {
	w sliceWriter
	z *gzip.Writer
}

type lz4Writer struct {
	w sliceWriter
	z *lz4.Writer
}

// zstdWriter is a pooled zstd encoder. Its first EncodeAll, on the
// goroutine that made it, makes the encoder's channel.
type zstdWriter struct {
	z *zstd.Encoder
	// bubbled: z was made inside a testing/synctest bubble; it serves
	// its one call and is never pooled (see inSynctestBubble).
	bubbled bool
}

// encoderPools holds one pool per codec and level: map[encoderKey]*sync.Pool.
var encoderPools sync.Map

type encoderKey struct {
	c     Compression
	level int
}

func encoderPool(c Compression, level int, newFn func() any) *sync.Pool {
	k := encoderKey{c, level}
	if p, ok := encoderPools.Load(k); ok {
		return p.(*sync.Pool)
	}
	p, _ := encoderPools.LoadOrStore(k, &sync.Pool{New: newFn})
	return p.(*sync.Pool)
}

func appendGzip(dst []byte, level int, src []byte) ([]byte, error) {
	if level == 0 {
		level = gzip.DefaultCompression
	}
	if level < gzip.HuffmanOnly || level > gzip.BestCompression {
		return dst, fmt.Errorf("partlog/batch: gzip level %d out of range", level)
	}
	pool := encoderPool(CompressionGzip, level, func() any {
		z, _ := gzip.NewWriterLevel(nil, level) // level checked above
		return &gzipWriter{z: z}
	})
	g := pool.Get().(*gzipWriter)
	g.w.b = dst
	g.z.Reset(&g.w)
	_, err := g.z.Write(src)
	if err == nil {
		err = g.z.Close()
	}
	dst = g.w.b
	g.w.b = nil
	pool.Put(g)
	return dst, err
}

// lz4Level maps a level 1-9 to pierrec/lz4's levels; 0 is its fast
// default.
func lz4Level(level int) (lz4.CompressionLevel, error) {
	if level == 0 {
		return lz4.Fast, nil
	}
	if level < 1 || level > 9 {
		return 0, fmt.Errorf("partlog/batch: lz4 level %d out of range [1, 9]", level)
	}
	return lz4Levels[level-1], nil
}

var lz4Levels = [...]lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5,
	lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}

func appendLZ4(dst []byte, level int, src []byte) ([]byte, error) {
	lvl, err := lz4Level(level)
	if err != nil {
		return dst, err
	}
	pool := encoderPool(CompressionLZ4, level, func() any {
		z := lz4.NewWriter(nil)
		// 64 KiB independent blocks without checksums, as the Java client
		// writes them: the batch's CRC-32C already covers the payload.
		// Reset keeps these options.
		if err := z.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(false),
			lz4.ChecksumOption(false), lz4.CompressionLevelOption(lvl), lz4.ConcurrencyOption(1)); err != nil {
			return err
		}
		return &lz4Writer{z: z}
	})
	got := pool.Get()
	l, ok := got.(*lz4Writer)
	if !ok {
		return dst, fmt.Errorf("partlog/batch: lz4 writer: %v", got)
	}
	l.w.b = dst
	l.z.Reset(&l.w)
	_, err = l.z.Write(src)
	if cerr := l.z.Close(); err == nil {
		err = cerr
	}
	dst = l.w.b
	l.w.b = nil
	l.z.Reset(nil)
	pool.Put(l)
	return dst, err
}

// zstd's levels: ZSTD_minCLevel (-(1<<17), its fastest) to ZSTD_maxCLevel,
// the range of Kafka's compression.zstd.level.
const (
	minZstdLevel = -1 << 17
	maxZstdLevel = 22
)

func appendZstd(dst []byte, level int, src []byte) ([]byte, error) {
	if level < minZstdLevel || level > maxZstdLevel {
		return dst, fmt.Errorf("partlog/batch: zstd level %d out of range [%d, %d]", level, minZstdLevel, maxZstdLevel)
	}
	lvl := zstd.SpeedDefault
	if level != 0 {
		lvl = zstd.EncoderLevelFromZstd(level)
	}
	pool := encoderPool(CompressionZstd, int(lvl), func() any {
		z, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1))
		return &zstdWriter{z: z, bubbled: inSynctestBubble()}
	})
	z := pool.Get().(*zstdWriter)
	dst = z.z.EncodeAll(src, dst) // makes z's channel on its first call
	if !z.bubbled {
		pool.Put(z)
	}
	return dst, nil
}

// appendXerial appends src as xerial-framed snappy, as the Java client
// writes it: the 16-byte header, then one chunk per 32 KiB of input.
func appendXerial(dst []byte, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
	dst = binary.BigEndian.AppendUint32(dst, xerialCompat)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		l := len(dst)
		dst = append(dst, make([]byte, xerialChunkLenLen+snappy.MaxEncodedLen(len(chunk)))...)
		enc := snappy.Encode(dst[l+xerialChunkLenLen:], chunk)
		binary.BigEndian.PutUint32(dst[l:], uint32(len(enc)))
		dst = dst[:l+xerialChunkLenLen+len(enc)]
	}
	return dst
}
