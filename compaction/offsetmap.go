package compaction

// offsetMap maps keys to the offset of their latest record in the dirty
// section of a partition, within a fixed memory budget (Kafka's
// SkimpyOffsetMap, without its silent loss).
//
// # Layout and collisions
//
// The map is an open-addressing hash table of 24-byte slots, probed
// linearly:
//
//	0       8         16        20        24
//	| hash  | offset  | keyPos  | keyLen  |
//
// hash is KeyHash(key) (xxhash64 by default), offset the record's offset
// plus one (0 marks an empty slot), and keyPos/keyLen locate the key's
// bytes in an arena of fixed-size chunks. A lookup walks the probe sequence
// comparing hashes first and, on a hash match, the whole key: two different
// keys with the same 64-bit hash simply occupy two slots. Kafka keeps only
// an MD5 of the key and would treat two colliding keys as one, dropping the
// older key's latest record; here a collision costs one extra probe and a
// key comparison, never a record.
//
// # Memory
//
// Memory is the table (24 bytes a slot, load factor at most 3/4) plus the
// key bytes. Both grow on demand and their total never passes the budget:
// Put reports false instead, and the round cleans up to the last offset it
// mapped. While the table doubles, the old table and the new one coexist;
// the budget counts both, so the peak stays within it.
type offsetMap struct {
	hash   func([]byte) uint64
	budget int

	slots  []slot
	mask   uint64
	n      int // used slots
	chunks [][]byte
	used   int // key bytes used in the last chunk
	keyMem int // bytes allocated to key chunks
	chunk  int // size of a key chunk: 64 KiB, less for a small budget

	// latest is the largest offset put, -1 when empty.
	latest int64
}

// slot is one table entry; off is the offset plus one, 0 when empty.
type slot struct {
	hash   uint64
	off    int64
	keyPos uint32
	keyLen uint32
}

const (
	slotSize    = 24
	minSlots    = 64
	maxKeyChunk = 64 << 10
)

// newOffsetMap returns an empty map bounded by budget bytes.
func newOffsetMap(budget int, hash func([]byte) uint64) *offsetMap {
	m := &offsetMap{hash: hash, budget: budget, chunk: min(maxKeyChunk, max(budget/8, 256))}
	m.reset()
	return m
}

// reset empties the map, keeping its first key chunk.
func (m *offsetMap) reset() {
	n := minSlots
	for n*slotSize*4 < m.budget/8 && n < 1<<16 {
		n *= 2
	}
	if len(m.slots) != n {
		m.slots = make([]slot, n)
	} else {
		clear(m.slots)
	}
	m.mask = uint64(n - 1)
	m.n = 0
	if len(m.chunks) > 1 {
		m.chunks = m.chunks[:1]
	}
	m.keyMem = m.chunk * len(m.chunks)
	m.used = 0
	m.latest = -1
}

// memory returns the bytes the map holds now.
func (m *offsetMap) memory() int { return len(m.slots)*slotSize + m.keyMem }

// key returns the key bytes of s.
func (m *offsetMap) key(s *slot) []byte {
	c := int(s.keyPos) / m.chunk
	p := int(s.keyPos) % m.chunk
	return m.chunks[c][p : p+int(s.keyLen)]
}

// find returns the index of key's slot, or of the empty slot where it
// would go.
func (m *offsetMap) find(key []byte, h uint64) int {
	i := h & m.mask
	for {
		s := &m.slots[i]
		if s.off == 0 {
			return int(i)
		}
		if s.hash == h && int(s.keyLen) == len(key) && string(m.key(s)) == string(key) {
			return int(i)
		}
		i = (i + 1) & m.mask
	}
}

// Get returns the offset mapped for key.
func (m *offsetMap) Get(key []byte) (int64, bool) {
	s := &m.slots[m.find(key, m.hash(key))]
	if s.off == 0 {
		return 0, false
	}
	return s.off - 1, true
}

// Put maps key to offset (offsets are put in increasing order). It
// returns false, changing nothing, when the key is new and the budget
// cannot take it.
func (m *offsetMap) Put(key []byte, offset int64) bool {
	h := m.hash(key)
	i := m.find(key, h)
	if s := &m.slots[i]; s.off != 0 {
		s.off = offset + 1
		m.latest = max(m.latest, offset)
		return true
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		if !m.grow() {
			return false
		}
		i = m.find(key, h)
	}
	pos, ok := m.storeKey(key)
	if !ok {
		return false
	}
	m.slots[i] = slot{hash: h, off: offset + 1, keyPos: pos, keyLen: uint32(len(key))}
	m.n++
	m.latest = max(m.latest, offset)
	return true
}

// storeKey copies key into the arena.
func (m *offsetMap) storeKey(key []byte) (uint32, bool) {
	if len(key) > m.chunk {
		// A key larger than a chunk gets a chunk of its own size,
		// rounded up to whole chunks so positions stay computable.
		n := (len(key) + m.chunk - 1) / m.chunk
		if m.memory()+n*m.chunk > m.budget {
			return 0, false
		}
		pos := len(m.chunks) * m.chunk
		big := make([]byte, n*m.chunk)
		copy(big, key)
		// Register the big chunk as n chunks aliasing it.
		for j := 0; j < n; j++ {
			m.chunks = append(m.chunks, big[j*m.chunk:])
		}
		m.keyMem += n * m.chunk
		m.used = m.chunk
		return uint32(pos), true
	}
	if len(m.chunks) == 0 || m.used+len(key) > m.chunk {
		if m.memory()+m.chunk > m.budget {
			return 0, false
		}
		m.chunks = append(m.chunks, make([]byte, m.chunk))
		m.keyMem += m.chunk
		m.used = 0
	}
	c := len(m.chunks) - 1
	pos := c*m.chunk + m.used
	copy(m.chunks[c][m.used:], key)
	m.used += len(key)
	return uint32(pos), true
}

// grow doubles the table if the budget allows both tables at once.
func (m *offsetMap) grow() bool {
	n := len(m.slots) * 2
	if m.memory()+n*slotSize > m.budget {
		return false
	}
	old := m.slots
	m.slots = make([]slot, n)
	m.mask = uint64(n - 1)
	for i := range old {
		s := &old[i]
		if s.off == 0 {
			continue
		}
		j := s.hash & m.mask
		for m.slots[j].off != 0 {
			j = (j + 1) & m.mask
		}
		m.slots[j] = *s
	}
	return true
}

// Len returns the number of keys mapped.
func (m *offsetMap) Len() int { return m.n }
