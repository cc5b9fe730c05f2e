package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestKillSwitches: a switch set is listed until it is lifted or expires,
// survives a restart, and an expired one is deleted by the next set.
func TestKillSwitches(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, db testDB) {
		s := open(t, db)
		t0 := now()
		all := &KillSwitch{ID: "ks_all", Block: KillTools, Reason: "incident 42", CreatedBy: "oncall", CreatedAt: t0}
		mail := &KillSwitch{ID: "ks_mail", Block: KillTools, Tools: []string{"send_*", "http_post"}, Tenant: "acme",
			Reason: "exfiltration", CreatedBy: "oncall", CreatedAt: t0.Add(time.Millisecond), ExpiresAt: t0.Add(time.Hour)}
		turns := &KillSwitch{ID: "ks_turns", Block: KillTurns, Agent: "support", Reason: "runaway agent", CreatedBy: "oncall",
			CreatedAt: t0.Add(2 * time.Millisecond)}
		for _, k := range []*KillSwitch{all, mail, turns} {
			if err := s.PutKillSwitch(ctx, k); err != nil {
				t.Fatalf("PutKillSwitch(%s): %v", k.ID, err)
			}
		}
		if err := s.PutKillSwitch(ctx, all); !errors.Is(err, ErrConflict) {
			t.Errorf("PutKillSwitch of a taken id: err = %v, want ErrConflict", err)
		}
		s = reopen(t, db, s)
		got := killSwitchIDs(t, s, t0)
		if want := []string{"ks_all", "ks_mail", "ks_turns"}; !slices.Equal(got, want) {
			t.Errorf("after a restart: switches %v, want %v", got, want)
		}
		list, _ := s.KillSwitches(ctx, t0)
		if m := list[1]; !slices.Equal(m.Tools, mail.Tools) || m.Tenant != "acme" || !m.ExpiresAt.Equal(mail.ExpiresAt) || m.Reason != "exfiltration" {
			t.Errorf("stored switch = %+v, want %+v", m, *mail)
		}
		if list[0].Tools == nil || len(list[0].Tools) != 0 {
			t.Errorf("switch of every tool: Tools = %#v, want empty", list[0].Tools)
		}
		if got := killSwitchIDs(t, s, t0.Add(time.Hour)); !slices.Equal(got, []string{"ks_all", "ks_turns"}) {
			t.Errorf("at its expiry: switches %v, want ks_mail gone", got)
		}

		lifted, err := s.LiftKillSwitch(ctx, "ks_all")
		if err != nil || lifted.ID != "ks_all" || lifted.Reason != "incident 42" {
			t.Fatalf("LiftKillSwitch = %+v, %v", lifted, err)
		}
		if _, err := s.LiftKillSwitch(ctx, "ks_all"); !errors.Is(err, ErrNotFound) {
			t.Errorf("lifting it again: err = %v, want ErrNotFound", err)
		}
		if got := killSwitchIDs(t, s, t0); !slices.Equal(got, []string{"ks_mail", "ks_turns"}) {
			t.Errorf("after the lift: switches %v", got)
		}

		// An expired switch is deleted by the next set.
		old := &KillSwitch{ID: "ks_old", Block: KillTools, Reason: "r", CreatedBy: "oncall", CreatedAt: t0, ExpiresAt: t0.Add(-time.Second)}
		if err := s.PutKillSwitch(ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := s.PutKillSwitch(ctx, &KillSwitch{ID: "ks_next", Block: KillTurns, Reason: "r", CreatedBy: "oncall", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, s, `SELECT COUNT(*) FROM kill_switches WHERE id = 'ks_old'`); n != 0 {
			t.Errorf("the expired switch has %d rows after the next set, want 0", n)
		}
	})
}

func TestKillSwitchInvalid(t *testing.T) {
	ctx := context.Background()
	forEachStore(t, func(t *testing.T, s Store) {
		for _, k := range []*KillSwitch{
			{ID: "", Block: KillTools, CreatedAt: now()},
			{ID: "ks_1", Block: "everything", CreatedAt: now()},
			{ID: "ks_2", Block: KillTools, Reason: "nul\x00byte", CreatedAt: now()},
			{ID: "ks_3", Block: KillTools, Tools: []string{"\xff"}, CreatedAt: now()},
			{ID: "ks_4", Block: KillTools},
		} {
			if err := s.PutKillSwitch(ctx, k); !errors.Is(err, ErrInvalid) {
				t.Errorf("PutKillSwitch(%+v): err = %v, want ErrInvalid", k, err)
			}
		}
	})
}

// TestKillSwitchNotifies: on PostgreSQL, setting and lifting a switch
// notify ChannelKillSwitch, which every replica listens to.
func TestKillSwitchNotifies(t *testing.T) {
	db := freshPostgres(t)
	s := open(t, db).(*Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Notification, 4)
	ready := make(chan struct{})
	go func() {
		_ = s.Listen(ctx, func() { close(ready) }, func(n Notification) { got <- n })
	}()
	<-ready
	if err := s.PutKillSwitch(ctx, &KillSwitch{ID: "ks_1", Block: KillTurns, Reason: "r", CreatedBy: "x", CreatedAt: now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LiftKillSwitch(ctx, "ks_1"); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"set", "lift"} {
		if n := <-got; n.Channel != ChannelKillSwitch {
			t.Errorf("%s: notification on %q, want %q", what, n.Channel, ChannelKillSwitch)
		}
	}
}

func killSwitchIDs(t *testing.T, s Store, at time.Time) []string {
	t.Helper()
	list, err := s.KillSwitches(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	return ids
}
