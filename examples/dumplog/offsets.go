package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Kafka's __consumer_offsets records, as --offsets-decoder shows them. Keys:
// int16 version; versions 0 and 1 are offset commits (string group, string
// topic, int32 partition), version 2 is group metadata (string group).
// Offset-commit values: int16 version, then v0: int64 offset, string
// metadata, int64 commitTimestamp; v1: the same plus int64 expireTimestamp;
// v2: as v0; v3: int64 offset, int32 leaderEpoch, string metadata, int64
// commitTimestamp. Strings are int16 length + bytes.

// cursor reads big-endian fields with a sticky failure flag.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n < 0 || n > len(c.b) {
		c.bad = true
		return nil
	}
	p := c.b[:n]
	c.b = c.b[n:]
	return p
}

func (c *cursor) i16() int16 {
	if p := c.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (c *cursor) i32() int32 {
	if p := c.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (c *cursor) i64() int64 {
	if p := c.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (c *cursor) str() string {
	return string(c.take(int(c.i16())))
}

// done reports whether everything was read, exactly.
func (c *cursor) done() bool { return !c.bad && len(c.b) == 0 }

// decodeOffsetsKey formats a __consumer_offsets key; ok is false for bytes
// that are not one.
func decodeOffsetsKey(k []byte) (string, bool) {
	c := cursor{b: k}
	switch v := c.i16(); v {
	case 0, 1:
		g, t, p := c.str(), c.str(), c.i32()
		return fmt.Sprintf("offset_commit::group=%s,topic=%s,partition=%d", strconv.Quote(g), strconv.Quote(t), p), c.done()
	case 2:
		g := c.str()
		return fmt.Sprintf("group_metadata::group=%s", strconv.Quote(g)), c.done()
	}
	return "", false
}

// decodeOffsetsValue formats the value of an offset-commit key; ok is false
// for group metadata and unknown versions (shown raw).
func decodeOffsetsValue(k, v []byte) (string, bool) {
	if v == nil {
		return "null (tombstone)", true
	}
	kc := cursor{b: k}
	if kv := kc.i16(); kv != 0 && kv != 1 {
		return "", false // group metadata: shown raw
	}
	c := cursor{b: v}
	ver := c.i16()
	var s string
	switch ver {
	case 0, 2:
		off, md, ts := c.i64(), c.str(), c.i64()
		s = fmt.Sprintf("offset_commit_v%d::offset=%d,metadata=%s,commitTimestamp=%d", ver, off, strconv.Quote(md), ts)
	case 1:
		off, md, ts, exp := c.i64(), c.str(), c.i64(), c.i64()
		s = fmt.Sprintf("offset_commit_v1::offset=%d,metadata=%s,commitTimestamp=%d,expireTimestamp=%d", off, strconv.Quote(md), ts, exp)
	case 3:
		off, ep, md, ts := c.i64(), c.i32(), c.str(), c.i64()
		s = fmt.Sprintf("offset_commit_v3::offset=%d,leaderEpoch=%d,metadata=%s,commitTimestamp=%d", off, ep, strconv.Quote(md), ts)
	default:
		return "", false
	}
	return s, c.done()
}
