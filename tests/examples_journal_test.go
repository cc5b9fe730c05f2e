package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// shop is the tool-journal example's stand-in shop: /charge answers at
// once, /ship waits until released.
type shop struct {
	charge, ship *toolBackend
}

// shops are the running shops by URL, for the scenario to find its own.
var shops sync.Map

// journalShop serves a shop until the test ends and points the example's
// SHOP_URL at it.
func journalShop(t *testing.T) []string {
	s := &shop{charge: newToolBackend(false), ship: newToolBackend(true)}
	mux := http.NewServeMux()
	mux.Handle("POST /charge", s.charge)
	mux.Handle("POST /ship", s.ship)
	srv := httptest.NewServer(mux)
	shops.Store(srv.URL, s)
	t.Cleanup(func() {
		s.ship.release()
		srv.Close()
		shops.Delete(srv.URL)
	})
	return []string{"SHOP_URL=" + srv.URL}
}

// exampleToolJournal: the gateway is killed with SIGKILL while a
// submission's turn waits on shipping, after the charge; the restarted
// gateway completes it without charging again, and the interrupted
// shipping call is retried under the same Idempotency-Key.
func exampleToolJournal(t *testing.T, x *exampleRun) {
	url, _ := strings.CutPrefix(x.opts.Env[0], "SHOP_URL=")
	v, ok := shops.Load(url)
	if !ok {
		t.Fatalf("no shop at %s", url)
	}
	s := v.(*shop)
	const session = "order-1"
	var sub submission
	x.json(http.MethodPost, "/v1/agents/shop/sessions/"+session+"/messages",
		map[string]any{"text": "buy a lamp", "async": true}, http.StatusAccepted, &sub)
	first := s.ship.waitCall(t)

	x.Kill()
	s.ship.release()
	x.start()

	waitCompleted(t, x.gateway, "shop", session, sub.SubmissionID)
	if n := len(s.charge.received()); n != 1 {
		t.Errorf("the card was charged %d times, want once", n)
	}
	ships := s.ship.received()
	if len(ships) != 2 || ships[1].IdempotencyKey != first.IdempotencyKey || first.IdempotencyKey == "" {
		t.Errorf("shipping calls %+v, want two under the first one's Idempotency-Key", ships)
	}
	msgs := x.history("shop", session)
	if len(msgs) != 2 || !strings.Contains(msgs[1].text(), `Charged: {"calls":1,`) || !strings.Contains(msgs[1].text(), "Done:") {
		t.Errorf("history = %+v, want the answer naming the first charge and the shipment", msgs)
	}
}
