package store

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
)

func TestOpenSQLiteSynchronous(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"default is full", nil, 2},
		{"full", []Option{WithSynchronous(SynchronousFull)}, 2},
		{"normal", []Option{WithSynchronous(SynchronousNormal)}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenSQLite(filepath.Join(t.TempDir(), "t.db"), tc.opts...)
			if err != nil {
				t.Fatalf("OpenSQLite: %v", err)
			}
			defer s.Close()
			var got int
			if err := s.w.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatalf("reading the pragma: %v", err)
			}
			if got != tc.want {
				t.Errorf("writer's synchronous = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestOpenSQLiteRejectsUnknownSynchronous(t *testing.T) {
	for _, mode := range []string{"", "off", "FULL", "extra"} {
		_, err := OpenSQLite(filepath.Join(t.TempDir(), "t.db"), WithSynchronous(mode))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("synchronous %q: error %v, want ErrInvalid", mode, err)
		}
	}
}

// BenchmarkAdmitSynchronous measures one admission commit with each
// synchronous setting, on the file system of t.TempDir (tmpfs makes them
// equal: it does not sync).
func BenchmarkAdmitSynchronous(b *testing.B) {
	for _, mode := range []string{SynchronousFull, SynchronousNormal} {
		b.Run(mode, func(b *testing.B) {
			s, err := OpenSQLite(filepath.Join(b.TempDir(), "t.db"), WithSynchronous(mode))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m := text("", "What is the weather in Paris today, and should I take an umbrella?")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				m.ID = strconv.Itoa(i)
				if _, err := s.Admit(context.Background(), "acme", "demo", "s1", nil, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
