package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrUnavailable reports a store that could not be reached or did not
// answer within its deadline (see Bounded): the database is down, frozen,
// restarting or out of connections. The call may succeed when retried
// later; see UnavailableError for whether a write stored anything.
var ErrUnavailable = errors.New("store: unavailable")

// UnavailableError is the error of a store call that failed because the
// store is unavailable. errors.Is(err, ErrUnavailable) holds, and so does
// errors.Is/As for the driver's error it wraps.
type UnavailableError struct {
	// Op is the store method, such as "FinishTurn".
	Op string
	// Timeout reports a call that did not answer within the store's
	// deadline.
	Timeout time.Duration
	// NotSent reports a failure that certainly stored nothing: the
	// database was never reached with the call (its connection failed
	// first), or it refused it and rolled it back (SQLite's lock). Such a
	// call is safe to make again (Retryable); otherwise a write's outcome
	// is unknown.
	NotSent bool
	// Err is the driver's error.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("%v: %s did not answer within %v", ErrUnavailable, e.Op, e.Timeout)
	}
	return fmt.Sprintf("%v: %s: %v", ErrUnavailable, e.Op, e.Err)
}

// Unwrap makes errors.Is(err, ErrUnavailable) hold, and exposes Err.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Retryable reports whether err is the failure of a store call that
// certainly stored nothing, because the store was unavailable: making the
// call again cannot store it twice.
func Retryable(err error) bool {
	ue, ok := errors.AsType[*UnavailableError](err)
	return ok && ue.NotSent
}

// RetryWrite runs write, and runs it again after a short pause while it
// fails because the store is unavailable in a way that allows it, and ctx
// lasts (at most retryAttempts times in all). A write that is not
// idempotent runs again only after a Retryable failure, which stored
// nothing; an idempotent one (a replace by key, fenced by the caller's
// lease when it has one) also after a failure whose outcome is unknown,
// such as a timeout. It returns write's last error.
func RetryWrite(ctx context.Context, idempotent bool, write func() error) error {
	pause := retryPause
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || attempt == retryAttempts || !(Retryable(err) || idempotent && errors.Is(err, ErrUnavailable)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// retryAttempts and retryPause bound RetryWrite: 4 attempts over 0.1+0.2+0.4 s.
const (
	retryAttempts = 4
	retryPause    = 100 * time.Millisecond
)

// unavailable returns err as an *UnavailableError of op when it says that
// the store could not be reached or answer, and err unchanged otherwise (a
// refusal of the store's own, such as ErrNotFound, or a bug).
func unavailable(op string, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	for _, own := range ownErrors {
		if errors.Is(err, own) {
			return err
		}
	}
	switch notSent, ok := driverUnavailable(err); {
	case ok:
		return &UnavailableError{Op: op, NotSent: notSent, Err: err}
	}
	return err
}

// ownErrors are the store's refusals: answers of a store that works.
var ownErrors = []error{ErrNotFound, ErrConflict, ErrInvalid, ErrQueueFull, ErrSchemaTooNew, ErrFenced,
	ErrLeaseHeld, ErrLeaseReleased, ErrTurnQueueFull, ErrNotQueued, errClosed}

// driverUnavailable reports whether err, an error of a driver, says that
// the database could not be reached or could not serve, and whether the
// call then certainly stored nothing.
func driverUnavailable(err error) (notSent, ok bool) {
	if pgconn.SafeToRetry(err) {
		return true, true // pgx never sent the statement
	}
	if e, isSQLite := errors.AsType[*sqlite.Error](err); isSQLite {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true, true // SQLite refused the transaction and rolled it back
		case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
			return false, true
		}
		return false, false
	}
	if e, isPG := errors.AsType[*pgconn.PgError](err); isPG {
		switch {
		case len(e.Code) == 5 && e.Code[:2] == "08", // connection exception
			e.Code == "57P01", e.Code == "57P02", e.Code == "57P03", // the server shuts down or starts up
			e.Code == "53300": // too many connections
			return false, true
		}
		return false, false
	}
	if _, isConnect := errors.AsType[*pgconn.ConnectError](err); isConnect {
		return true, true
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne), pgconn.Timeout(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, pgconn.ErrConnClosed):
		return false, true
	}
	return false, false
}
