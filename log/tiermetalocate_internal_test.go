package log

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRemoteMetaLocate: where a read below the local log start begins,
// for every place an offset can lie among the copies: in a copied segment,
// in a gap before the next one (a follower's offsets, or the range of a
// copy recorded "deleting", which no read sees), in the gap from the last
// copy up to the local log start, or below the first copy.
func TestRemoteMetaLocate(t *testing.T) {
	tp := TopicPartition{"t", 0}
	seg := func(state remoteState, base, end int64) remoteEntry {
		return remoteEntry{state: state, desc: RemoteSegmentMetadata{ID: NewRemoteSegmentID(tp), BaseOffset: base, EndOffset: end}}
	}
	const localStart = 60
	m := &remoteMeta{segs: []remoteEntry{
		seg(remoteDeleting, 0, 9), // total retention under way
		seg(remoteCopied, 10, 19),
		seg(remoteCopied, 25, 29),
		seg(remoteDeleting, 30, 34), // no read sees it
		seg(remoteCopied, 40, 49),
		seg(remoteCopied, 60, 69), // its segment is still local
		seg(remoteCopying, 70, 79),
	}}
	noCopy := RemoteSegmentMetadata{}
	for _, tc := range []struct {
		name   string
		offset int64
		md     RemoteSegmentMetadata
		how    copyRead
	}{
		{"below the first copy", 0, noCopy, copyNone},
		{"below the first copy, at its end", 9, noCopy, copyNone},
		{"first copy's base", 10, m.segs[1].desc, copyServed},
		{"first copy's end", 19, m.segs[1].desc, copyServed},
		{"gap between copies", 20, m.segs[2].desc, copyServed},
		{"gap before the next copy's base", 24, m.segs[2].desc, copyServed},
		{"range of a deleting copy", 32, m.segs[4].desc, copyServed},
		{"in a copy", 45, m.segs[4].desc, copyServed},
		{"gap up to the local log start", 50, noCopy, copyLocal},
		{"just below the local log start", 59, noCopy, copyLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, how := m.locate(tc.offset, localStart)
			require.Equal(t, tc.how, how)
			require.Equal(t, tc.md, md)
		})
	}
	none := &remoteMeta{segs: []remoteEntry{seg(remoteDeleting, 0, 9), seg(remoteCopying, 10, 19)}}
	_, how := none.locate(5, localStart)
	require.Equal(t, copyNone, how, "no copied segment: no offset below the local log start is in the log")
}
