package idempotency

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// l1Cache is where L1 keeps its entries: in rings of byte chunks, one
// ring per shard, each found through a map from its key's hash to where
// it lies. No part of it holds a pointer per entry (the chunks are byte
// slices, the maps hold integers), so a garbage collection marks a full
// L1 in a few hundred objects instead of visiting every entry: on a
// machine whose cores the api shares with PostgreSQL, that collection
// is what a submit's latency tail is made of (see docs/performance.md).
//
// A ring is written front to back and, when full, from the front again:
// the oldest entries give way first, and the memory is bounded by the
// budget however many responses pass through. An entry is never split
// between chunks; one larger than a chunk is not kept (Redis and
// PostgreSQL still answer it).
type l1Cache struct {
	seed      maphash.Seed
	ttl       time.Duration
	now       func() time.Time
	chunkSize uint32
	chunks    uint32 // per shard
	shards    [l1Shards]l1Shard
	// indexed and ringBytes are kept as entries come and go, for the
	// metrics: a scrape reads two numbers, and takes no shard's lock.
	indexed   atomic.Int64 // index entries, expired ones until dropped
	ringBytes atomic.Int64 // chunk memory allocated
}

// l1Shards spreads the writers' locks; a power of two.
const l1Shards = 64

// l1MaxChunk is the largest chunk, and so the largest entry L1 keeps:
// a submit's answer is about 1 KiB.
const l1MaxChunk = 64 << 10

// l1IndexShare is the part of the budget left to the maps: an index
// entry takes about 20 bytes, and as many as two per live entry (see
// l1Shard.wrap), against about 1 KiB of packed answer.
const l1IndexShare = 8

// l1Shard is one ring and its index. pos and gen say which bytes are
// current: an entry written in this generation below pos, or in the
// previous one at or above pos (not yet overwritten).
type l1Shard struct {
	mu     sync.RWMutex
	index  map[uint64]uint64 // key hash → generation<<32 | offset in the ring
	chunks [][]byte          // the ring, allocated as it first fills
	gen    uint32
	pos    uint32
	_      [64]byte // one shard's lock per cache line
}

// An entry in the ring: a fixed header, the key, then the packed record
// (l1Entry.buf).
const (
	l1HeaderSize = 40
	hdrKeyLen    = 0  // uint16
	hdrStatus    = 2  // uint16
	hdrBufLen    = 4  // uint32
	hdrFpEnd     = 8  // uint32
	hdrReqEnd    = 12 // uint32
	hdrHdrEnd    = 16 // uint32
	hdrOrderID   = 24 // int64
	hdrExpires   = 32 // int64, Unix nanoseconds
)

// newL1Cache returns an empty cache whose chunks, allocated as they are
// first written, take at most budget bytes with their maps.
func newL1Cache(budget uint64, ttl time.Duration, now func() time.Time) *l1Cache {
	ring := min(budget-budget/l1IndexShare, l1Shards*math.MaxUint32) / l1Shards // an offset is 32 bits
	c := &l1Cache{seed: maphash.MakeSeed(), ttl: ttl, now: now}
	c.chunkSize = uint32(max(min(ring, l1MaxChunk), l1HeaderSize)) //nolint:gosec // G115: at most 64 KiB
	c.chunks = uint32(max(ring/uint64(c.chunkSize), 1))            //nolint:gosec // G115: ring fits 32 bits
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]uint64)
		c.shards[i].gen = 1
	}
	return c
}

func (c *l1Cache) hash(key string) uint64 { return maphash.String(c.seed, key) }

func (c *l1Cache) shard(h uint64) *l1Shard { return &c.shards[h&(l1Shards-1)] }

// valid reports whether the entry at ref (as the index holds it) is
// still in the ring.
func (sh *l1Shard) valid(ref uint64) bool {
	gen, off := uint32(ref>>32), uint32(ref) //nolint:gosec // G115: unpacking what set packed
	return gen == sh.gen && off < sh.pos || gen+1 == sh.gen && off >= sh.pos
}

// at is the entry at ref, nil if the ring no longer holds it.
func (c *l1Cache) at(sh *l1Shard, ref uint64) []byte {
	if !sh.valid(ref) {
		return nil
	}
	off := uint32(ref) //nolint:gosec // G115: unpacking what set packed
	chunk := sh.chunks[off/c.chunkSize]
	e := chunk[off%c.chunkSize:]
	n := l1HeaderSize + int(binary.LittleEndian.Uint16(e[hdrKeyLen:])) + int(binary.LittleEndian.Uint32(e[hdrBufLen:]))
	return e[:n:n]
}

// lookup is key's entry in sh if it is there and not expired. The caller
// holds sh.mu.
func (c *l1Cache) lookup(sh *l1Shard, h uint64, key string, now int64) []byte {
	ref, ok := sh.index[h]
	if !ok {
		return nil
	}
	e := c.at(sh, ref)
	if e == nil || string(e[l1HeaderSize:l1HeaderSize+entryKeyLen(e)]) != key || int64(binary.LittleEndian.Uint64(e[hdrExpires:])) <= now { //nolint:gosec // G115: written from an int64
		return nil
	}
	return e
}

// entryKeyLen is the length of the key an entry was written under.
func entryKeyLen(e []byte) int { return int(binary.LittleEndian.Uint16(e[hdrKeyLen:])) }

// view calls f with key's entry, if L1 holds it, and reports whether it
// did. The entry shares the ring's memory, which a later write reuses:
// f must copy what it keeps, and must not call into the cache.
func (c *l1Cache) view(key string, f func(l1Entry)) bool {
	h := c.hash(key)
	sh := c.shard(h)
	now := c.now().UnixNano()
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := c.lookup(sh, h, key, now)
	if e == nil {
		return false
	}
	f(l1Entry{
		buf:     e[l1HeaderSize+entryKeyLen(e):],
		orderID: int64(binary.LittleEndian.Uint64(e[hdrOrderID:])), //nolint:gosec // G115: written from an int64
		status:  int32(binary.LittleEndian.Uint16(e[hdrStatus:])),
		fpEnd:   binary.LittleEndian.Uint32(e[hdrFpEnd:]),
		reqEnd:  binary.LittleEndian.Uint32(e[hdrReqEnd:]),
		hdrEnd:  binary.LittleEndian.Uint32(e[hdrHdrEnd:]),
	})
	return true
}

// set keeps rec under key, in place of what key held, and reports
// whether it did: an entry larger than a chunk is not kept. A chunk is
// at most 64 KiB, so the key and every header name and value in a kept
// entry fit the two-byte lengths they are written with.
func (c *l1Cache) set(key string, rec Record) bool {
	if rec.Response.Status < 0 || rec.Response.Status > math.MaxUint16 {
		return false
	}
	n := l1HeaderSize + len(key) + packedLen(rec)
	if n > int(c.chunkSize) {
		return false
	}
	h := c.hash(key)
	sh := c.shard(h)
	expires := c.now().Add(c.ttl).UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	off := c.reserve(sh, uint32(n)) //nolint:gosec // G115: at most a chunk
	e := sh.chunks[off/c.chunkSize][off%c.chunkSize:][:n:n]
	// e has room for exactly the packed record: it is written in place.
	_, fpEnd, reqEnd, hdrEnd := appendPacked(e[:l1HeaderSize+len(key)], rec)
	binary.LittleEndian.PutUint16(e[hdrKeyLen:], uint16(len(key))) //nolint:gosec // G115: the entry fits a chunk
	binary.LittleEndian.PutUint16(e[hdrStatus:], uint16(rec.Response.Status))
	binary.LittleEndian.PutUint32(e[hdrBufLen:], uint32(n-l1HeaderSize-len(key))) //nolint:gosec // G115: at most a chunk
	binary.LittleEndian.PutUint32(e[hdrFpEnd:], fpEnd)
	binary.LittleEndian.PutUint32(e[hdrReqEnd:], reqEnd)
	binary.LittleEndian.PutUint32(e[hdrHdrEnd:], hdrEnd)
	binary.LittleEndian.PutUint64(e[hdrOrderID:], uint64(rec.OrderID)) //nolint:gosec // G115: read back as an int64
	binary.LittleEndian.PutUint64(e[hdrExpires:], uint64(expires))     //nolint:gosec // G115: read back as an int64
	copy(e[l1HeaderSize:], key)
	if _, ok := sh.index[h]; !ok {
		c.indexed.Add(1)
	}
	sh.index[h] = uint64(sh.gen)<<32 | uint64(off)
	return true
}

// reserve finds room for n bytes at the ring's write position, in one
// chunk, and returns its offset. The caller holds sh.mu for writing.
func (c *l1Cache) reserve(sh *l1Shard, n uint32) uint32 {
	if sh.pos%c.chunkSize+n > c.chunkSize { // the rest of this chunk is too small
		sh.pos += c.chunkSize - sh.pos%c.chunkSize
	}
	if uint64(sh.pos)+uint64(n) > uint64(c.chunks)*uint64(c.chunkSize) {
		c.wrap(sh)
	}
	if i := sh.pos / c.chunkSize; int(i) == len(sh.chunks) {
		sh.chunks = append(sh.chunks, make([]byte, c.chunkSize))
		c.ringBytes.Add(int64(c.chunkSize))
	}
	off := sh.pos
	sh.pos += n
	return off
}

// wrap starts the ring's next generation from its front. Of what the
// index holds, the generation just finished stays current until written
// over; anything older was written over by it, and goes: the index never
// holds more than the ring's two latest generations.
func (c *l1Cache) wrap(sh *l1Shard) {
	sh.gen++
	sh.pos = 0
	dropped := 0
	for h, ref := range sh.index {
		if uint32(ref>>32)+1 != sh.gen { //nolint:gosec // G115: unpacking what set packed
			delete(sh.index, h)
			dropped++
		}
	}
	c.indexed.Add(-int64(dropped))
}

// invalidate drops key's entry and reports whether L1 held it.
func (c *l1Cache) invalidate(key string) bool {
	h := c.hash(key)
	sh := c.shard(h)
	now := c.now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.lookup(sh, h, key, now) == nil {
		return false
	}
	delete(sh.index, h)
	c.indexed.Add(-1)
	return true
}

// clear drops every entry; the chunks stay, to be written again.
func (c *l1Cache) clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.indexed.Add(-int64(len(sh.index)))
		clear(sh.index)
		sh.mu.Unlock()
	}
}

// release drops every entry and the chunks with them.
func (c *l1Cache) release() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.indexed.Add(-int64(len(sh.index)))
		c.ringBytes.Add(-int64(len(sh.chunks)) * int64(c.chunkSize))
		clear(sh.index)
		sh.chunks, sh.pos = nil, 0
		sh.gen++
		sh.mu.Unlock()
	}
}

// size is the number of current, unexpired entries and the bytes they
// take in the rings. It reads every index entry: for metrics and tests,
// not for the request path.
func (c *l1Cache) size() (entries int, bytes uint64) {
	now := c.now().UnixNano()
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for _, ref := range sh.index {
			e := c.at(sh, ref)
			if e != nil && int64(binary.LittleEndian.Uint64(e[hdrExpires:])) > now { //nolint:gosec // G115: written from an int64
				entries++
				bytes += uint64(len(e))
			}
		}
		sh.mu.RUnlock()
	}
	return entries, bytes
}
