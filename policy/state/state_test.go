package state

import (
	"testing"
	"time"

	"github.com/turngate/turngate/policy"
)

// TestWindows: where each kind of window starts, when an event counted now
// stops counting at the latest, and which bucket counts it.
func TestWindows(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	kathmandu, err := time.LoadLocation("Asia/Kathmandu") // UTC+5:45
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 23, 30, 45, 0, time.UTC)
	for _, tc := range []struct {
		name                 string
		w                    Window
		start, reset, bucket time.Time
	}{
		{"sliding hour by minute", Window{Within: time.Hour, Resolution: time.Minute},
			time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC), now.Add(61 * time.Minute), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
		{"sliding hour, default resolution", Window{Within: time.Hour},
			time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC), now.Add(61 * time.Minute), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
		{"calendar day in UTC", Window{Calendar: Day},
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
		{"calendar day in Berlin: already the 2nd", Window{Calendar: Day, Location: berlin},
			time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
		{"calendar hour in Kathmandu", Window{Calendar: Hour, Location: kathmandu},
			time.Date(2026, 12, 1, 23, 15, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 15, 0, 0, time.UTC), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
		{"calendar month", Window{Calendar: Month},
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.Start(now); !got.Equal(tc.start) {
				t.Errorf("Start = %v, want %v", got.UTC(), tc.start)
			}
			if got := tc.w.Reset(now); !got.Equal(tc.reset) {
				t.Errorf("Reset = %v, want %v", got.UTC(), tc.reset)
			}
			if got := tc.w.Bucket(now); !got.Equal(tc.bucket) {
				t.Errorf("Bucket = %v, want %v", got.UTC(), tc.bucket)
			}
			if b := tc.w.Bucket(tc.w.Start(now)); !b.Equal(tc.w.Start(now)) {
				t.Errorf("the window does not start on a bucket: %v", b.UTC())
			}
		})
	}
}

// TestNewSet: declarations from the config are checked as the file's.
func TestNewSet(t *testing.T) {
	ok := &Decl{Name: "turns", Kind: Count, Of: Turns, Scope: []ScopePart{{Kind: ScopePrincipal}}, Window: Window{Within: time.Minute}}
	if _, err := NewSet(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*Decl{
		{Name: "x", Kind: Sum, Of: Turns, Window: Window{Within: time.Minute}},
		{Name: "x", Kind: Count, Of: Turns, Outcomes: []string{"executed"}, Window: Window{Within: time.Minute}},
		{Name: "x", Kind: Count, Of: Turns},
		{Name: "X", Kind: Count, Of: Turns, Window: Window{Calendar: Day}},
	} {
		if _, err := NewSet(bad); err == nil {
			t.Errorf("NewSet(%+v) accepted it", bad)
		}
	}
	if _, err := NewSet(ok, ok); err == nil {
		t.Error("a name declared twice was accepted")
	}
}

// FuzzParse: no state file makes Parse panic or hang; what it accepts has
// a sound schema.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"state:\n  - name: a\n    count: toolCalls\n    tools: [x]\n    by: [principal, input.p.q]\n    within: 1h\n    resolution: 1m\n",
		"state:\n  - name: s\n    sum: input.amount\n    calendar: day\n    timeZone: Europe/Berlin\n",
		"state:\n  - {name: h, happenedBefore: turns, within: 7d}\n  - {name: d, countDistinct: input.to, within: 10s}\n",
		"state: [1, [2], {name: 3}]\n", "", "x: y\n", "state:\n  - name: a\n    count: toolCalls\n    count: turns\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, errs := Parse([]policy.File{{Path: "f.state.yaml", Data: data}})
		if errs == nil {
			_ = s.Schema()
		}
	})
}

// TestFingerprint: what a declaration counts names its rows; the order of
// its tools list does not (sorting the list kept every count), while
// another tool or scope starts from zero.
func TestFingerprint(t *testing.T) {
	decl := func(tools []string, scope ...ScopeKind) *Decl {
		d := &Decl{Name: "calls", Kind: Count, Of: ToolCalls, Tools: tools}
		for _, k := range scope {
			d.Scope = append(d.Scope, ScopePart{Kind: k})
		}
		return d
	}
	base := decl([]string{"send_email", "post"}, ScopePrincipal).Fingerprint()
	if got := decl([]string{"post", "send_email"}, ScopePrincipal).Fingerprint(); got != base {
		t.Error("reordering the tools changed the fingerprint")
	}
	if got := decl([]string{"post", "send_email", "post"}, ScopePrincipal).Fingerprint(); got != base {
		t.Error("repeating a tool changed the fingerprint")
	}
	for _, d := range []*Decl{decl([]string{"send_email"}, ScopePrincipal), decl([]string{"send_email", "post"}, ScopeTenant)} {
		if d.Fingerprint() == base {
			t.Errorf("%v %v has the fingerprint of another declaration", d.Tools, d.Scope)
		}
	}
}
