package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// KindChainStart is the record that starts a hash chain: the first record
// a sink writes after it opens, and the first of every file a rotation
// starts.
const KindChainStart = "chain-start"

// Reasons a chain starts.
const (
	ChainOpened  = "opened"  // the sink opened (gateway start)
	ChainRotated = "rotated" // the file sink rotated to a new file
)

// ChainStart is the chain-start record. Like every record it has seq (0
// for a chain-start) and, when the line written before it is known,
// prevHash: the last record of the file a rotation closed, or the last line
// of the file a restarted gateway appends to.
type ChainStart struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
}

// chain is a sink's hash chain: every line written carries seq, counting
// from 0 at the chain-start, and prevHash, the hex SHA-256 of the previous
// line's bytes without its newline. Its fields are guarded by Log.mu.
type chain struct {
	seq     uint64
	prev    [2 * sha256.Size]byte
	hasPrev bool
	// out is the line being written, chain members inserted.
	out []byte
	// rotate, for the file sink, closes the file and starts a new one;
	// size is what the current file holds and maxSize its limit.
	rotate        func() error
	size, maxSize int64
}

// chainAt says where a line's chain members go: the offsets of the
// top-level members they precede (or of the closing brace), so the line
// keeps its members in key order.
type chainAt struct{ prev, seq int }

// chainOffsets finds where prevHash and seq go in line, a compact JSON
// object with its top-level members in key order.
func chainOffsets(line []byte) chainAt {
	at := chainAt{-1, -1}
	i := 1
	for line[i] != '}' {
		keyEnd := valueEnd(line, i)
		key := sortKey(line[i:keyEnd])
		if at.prev < 0 && string(key) > "prevHash" {
			at.prev = i
		}
		if string(key) > "seq" {
			at.seq = i
			return at
		}
		i = valueEnd(line, keyEnd+1)
		if line[i] == ',' {
			i++
		}
	}
	if at.prev < 0 {
		at.prev = i
	}
	at.seq = i
	return at
}

// link returns line with the chain's members for it inserted.
func (l *Log) link(line []byte, at chainAt) []byte {
	out := append(l.out[:0], line[:at.prev]...)
	if l.hasPrev {
		var v [2*sha256.Size + 2]byte
		v[0], v[len(v)-1] = '"', '"'
		copy(v[1:], l.prev[:])
		out = insertMember(out, line[at.prev], `"prevHash":`, v[:])
	}
	out = append(out, line[at.prev:at.seq]...)
	var n [20]byte
	out = insertMember(out, line[at.seq], `"seq":`, strconv.AppendUint(n[:0], l.seq, 10))
	out = append(out, line[at.seq:]...)
	l.out = out
	return out
}

// insertMember appends the member key val placed before next, the first
// byte of the member it precedes or the object's closing brace.
func insertMember(out []byte, next byte, key string, val []byte) []byte {
	if next == '}' {
		out = append(out, ',')
	}
	out = append(out, key...)
	out = append(out, val...)
	if next != '}' {
		out = append(out, ',')
	}
	return out
}

// put writes line as the chain's next record, rotating the file first
// when it would grow past its limit, and returns the line as linked (its
// chain members in, its newline at the end; valid until the next put),
// also when writing it failed. It runs under l.mu.
func (l *Log) put(line []byte, at chainAt) ([]byte, error) {
	out := l.link(line, at)
	if l.full(len(out)) {
		if err := l.rotateFile(); err != nil {
			return out, err
		}
		if err := l.startChain(ChainRotated); err != nil {
			return out, err
		}
		out = l.link(line, at)
	}
	return out, l.emit(out)
}

// startChain writes a chain-start record. It runs under l.mu (or before
// the Log is shared).
func (l *Log) startChain(reason string) error {
	l.seq = 0
	b := lineBufs.Get().(*lineBuf)
	line, err := l.encode(b, KindChainStart, &ChainStart{Time: l.now(), Reason: reason})
	if err == nil {
		out := l.link(line, chainOffsets(line))
		if l.full(len(out)) {
			err = l.rotateFile()
		}
		if err == nil {
			err = l.emit(out)
		}
	}
	b.release(line)
	return err
}

// full reports whether a line of n bytes would take a non-empty file sink
// to its size limit (lumberjack rotates there on its own, without the
// chain knowing).
func (l *Log) full(n int) bool {
	return l.rotate != nil && l.size > 0 && l.size+int64(n) >= l.maxSize
}

func (l *Log) rotateFile() error {
	if err := l.rotate(); err != nil {
		return err
	}
	l.size = 0
	return nil
}

// emit writes out and makes it the chain's previous line.
func (l *Log) emit(out []byte) error {
	n, err := l.w.Write(out)
	l.size += int64(n)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(out[:len(out)-1])
	hex.Encode(l.prev[:], sum[:])
	l.hasPrev = true
	l.seq++
	if cap(l.out) > maxPooledLine {
		l.out = nil
	}
	return nil
}

// resume prepares a file sink to append to the file at path: its size,
// and the hash of its last line, which the new chain-start names. A file
// whose last line is incomplete (a torn write) gets a newline first, so
// the torn line stays a line of its own (verify reports it) and the new
// chain-start names no previous hash.
func (l *Log) resume(path string) error {
	size, last, err := lastLine(path)
	if err != nil {
		return err
	}
	l.size = size
	switch {
	case len(last) > 0 && last[len(last)-1] == '\n':
		sum := sha256.Sum256(last[:len(last)-1])
		hex.Encode(l.prev[:], sum[:])
		l.hasPrev = true
	case len(last) > 0:
		_, err = l.w.Write([]byte{'\n'})
		l.size++
	}
	return err
}

// lastLine returns the size of the file at path and its last line, with
// its newline when it has one; nil when the file is missing, empty or its
// last line is longer than MaxLineBytes.
func lastLine(path string) (int64, []byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	size := st.Size()
	var tail []byte
	for off := size; off > 0 && len(tail) <= MaxLineBytes; {
		n := min(off, 64<<10)
		off -= n
		chunk := make([]byte, n, int(n)+len(tail))
		if _, err := f.ReadAt(chunk, off); err != nil {
			return 0, nil, err
		}
		tail = append(chunk, tail...)
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			return size, tail[i+1:], nil
		}
		if off == 0 {
			return size, tail, nil
		}
	}
	return size, nil, nil
}
