package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
)

func ExampleOpenSQLite() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := store.OpenSQLite(filepath.Join(dir, "data", "turngate.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	_, created, _ := s.GetOrCreateSession(ctx, "acme", "demo", "chat-1")
	fmt.Println("created:", created)
	_ = s.AppendMessage(ctx, "acme", "chat-1", engine.UIMessage{ID: "u1", Role: engine.RoleUser,
		Parts: []engine.UIPart{{Type: engine.PartText, Text: "Hello"}}})
	msgs, _ := s.Messages(ctx, "acme", "chat-1")
	fmt.Println("messages:", len(msgs), msgs[0].Parts[0].Text)

	// Another tenant sees nothing.
	_, err = s.Messages(ctx, "globex", "chat-1")
	fmt.Println("other tenant:", errors.Is(err, store.ErrNotFound))

	// A durable submission, claimed by a worker and finished.
	sub, _, _ := s.CreateSubmission(ctx, &store.Submission{Tenant: "acme", SessionID: "chat-1", Agent: "demo",
		IdempotencyKey: "req-1", Request: json.RawMessage(`{"messages":[]}`)}, store.QueueLimits{})
	claimed, _ := s.ClaimSubmission(ctx, "replica-1", time.Minute)
	fmt.Println("claimed:", claimed.ID == sub.ID, claimed.Status)
	_ = s.FinishSubmission(ctx, sub.ID, claimed.Attempts, store.StatusCompleted, json.RawMessage(`{"messageId":"a1"}`))
	done, _ := s.GetSubmission(ctx, "acme", "chat-1", sub.ID)
	fmt.Println("status:", done.Status, string(done.Result))
	// Output:
	// created: true
	// messages: 1 Hello
	// other tenant: true
	// claimed: true running
	// status: completed {"messageId":"a1"}
}
