package gateway

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/store"
)

// submissionQueueRetry is the Retry-After of a submission refused because
// its queue is full: queued submissions take a turn each to drain.
const submissionQueueRetry = 5 * time.Second

// dropSubmissions serves DELETE …/sessions/:id/submissions?state=queued:
// the session's queued submissions end aborted (result {"error":
// "dropped"}) and the answer counts them. A running submission is left to
// its turn (cancel it with …/cancel).
func (s *Server) dropSubmissions(c *gin.Context) error {
	_, id, err := s.ownedSession(c)
	if err != nil {
		return err
	}
	if state := c.Query("state"); state != store.StatusQueued {
		return errField("state", "must be %q: only queued submissions can be dropped, not %q", store.StatusQueued, state)
	}
	n, err := s.store.DropQueued(c.Request.Context(), principal(c).Tenant, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"dropped": n, "status": store.StatusAborted})
	return nil
}
