package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ChainFields are the members of an audit line its hash chain is checked
// with.
type ChainFields struct {
	Kind string
	Seq  uint64
	// PrevHash is empty on a chain-start that names no previous line.
	PrevHash string
}

// ParseChainLine reads the chain members of one audit line (without its
// newline). It fails when the line is not a JSON object, or lacks kind or
// seq, or prevHash where a record must have one, or has one that is not a
// hex SHA-256.
func ParseChainLine(line []byte) (ChainFields, error) {
	var raw struct {
		Kind     *string      `json:"kind"`
		Seq      *json.Number `json:"seq"`
		PrevHash *string      `json:"prevHash"`
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return ChainFields{}, errors.New("empty line")
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return ChainFields{}, fmt.Errorf("not an audit record: %v", err)
	}
	var f ChainFields
	if raw.Kind == nil || *raw.Kind == "" {
		return f, errors.New("not an audit record: no kind")
	}
	f.Kind = *raw.Kind
	if raw.Seq == nil {
		return f, errors.New("no seq: not a chained audit record")
	}
	seq, err := strconv.ParseUint(raw.Seq.String(), 10, 64)
	if err != nil {
		return f, fmt.Errorf("seq %s is not a non-negative integer", raw.Seq)
	}
	f.Seq = seq
	if raw.PrevHash == nil {
		if f.Kind != KindChainStart {
			return f, errors.New("no prevHash")
		}
		return f, nil
	}
	if !isHexDigest(*raw.PrevHash) {
		return f, fmt.Errorf("prevHash %q is not a lowercase hex SHA-256", *raw.PrevHash)
	}
	f.PrevHash = *raw.PrevHash
	return f, nil
}

func isHexDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Break is the first place where an audit log's hash chain does not hold.
type Break struct {
	File string
	Line int
	Msg  string
}

func (b *Break) Error() string { return fmt.Sprintf("%s:%d: %s", b.File, b.Line, b.Msg) }

// Verifier checks the hash chains of audit files, given in the order they
// were written (rotated backups oldest first, then the live file): every
// record follows a chain-start, its seq is the previous one's plus one and
// its prevHash the SHA-256 of the previous line; a chain-start's seq is 0
// and its prevHash, when it has one, that of the line before it.
type Verifier struct {
	// Records counts the lines verified, chain-starts included; Chains
	// counts the chain-starts.
	Records, Chains int
	// Unanchored lists the chain-starts (file:line) whose prevHash names a
	// line before the first file verified, which could not be checked.
	Unanchored []string
	// LastHash is the hash of the last line verified, LastSeq its seq:
	// compare them with a copy kept elsewhere to detect a removed tail.
	LastHash string
	LastSeq  uint64

	inChain bool
	// prevAt is where the previous line is (file:line); "" before the first.
	prevAt string
}

// Verify checks the lines of r, the file name, continuing the chain of
// the files verified before. It returns the first *Break, or a read error.
func (v *Verifier) Verify(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	torn := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			torn = true
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	n := 0
	for sc.Scan() {
		n++
		if torn {
			return &Break{name, n, "the last line has no newline: a torn write, or the file was cut"}
		}
		at := name + ":" + strconv.Itoa(n)
		if err := v.line(sc.Bytes(), at); err != nil {
			return &Break{name, n, err.Error()}
		}
		v.prevAt = at
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &Break{name, n + 1, fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}

// line checks the line at at against the chain so far.
func (v *Verifier) line(line []byte, at string) error {
	f, err := ParseChainLine(line)
	if err != nil {
		return err
	}
	if f.Kind == KindChainStart {
		if f.Seq != 0 {
			return fmt.Errorf("chain-start has seq %d, want 0", f.Seq)
		}
		switch {
		case f.PrevHash == "":
		case v.prevAt == "":
			v.Unanchored = append(v.Unanchored, at)
		case f.PrevHash != v.LastHash:
			return fmt.Errorf("chain-start has prevHash %s, want %s (the SHA-256 of %s): that line was edited, or lines were removed, added or moved", f.PrevHash, v.LastHash, v.prevAt)
		}
		v.Chains++
		v.inChain = true
	} else {
		switch {
		case !v.inChain:
			return fmt.Errorf("%s record (seq %d) before any chain-start: the chain's first records were removed", f.Kind, f.Seq)
		case f.Seq != v.LastSeq+1:
			return fmt.Errorf("seq %d, want %d (after seq %d at %s): records were removed, added or moved", f.Seq, v.LastSeq+1, v.LastSeq, v.prevAt)
		case f.PrevHash != v.LastHash:
			return fmt.Errorf("prevHash %s, want %s (the SHA-256 of %s): that line was edited, or lines were removed, added or moved", f.PrevHash, v.LastHash, v.prevAt)
		}
	}
	sum := sha256.Sum256(line)
	v.LastHash, v.LastSeq = hex.EncodeToString(sum[:]), f.Seq
	v.Records++
	return nil
}
