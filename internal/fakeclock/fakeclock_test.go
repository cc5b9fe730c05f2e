package fakeclock

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	c := New(t0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { c.Advance(time.Minute); _ = c.Now() })
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(t0.Add(4 * time.Minute)) {
		t.Errorf("Now = %v, want four minutes after %v", got, t0)
	}
}
