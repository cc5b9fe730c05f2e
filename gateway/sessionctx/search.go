package sessionctx

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
)

// SearchToolName is the tool that searches the session's own history.
const SearchToolName = "search_history"

// defaultSearchLimit is the hits search_history returns when the model
// names no limit.
const defaultSearchLimit = 5

// searchInput is the search_history tool's input.
type searchInput struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// searchTool returns the search_history tool: a search of the stored
// messages of the calling turn's own session (tenant and session come
// from the turn, never from the input), with the full transcript, also
// what compaction took out of the prompt.
func (a *Agent) searchTool() engine.Tool {
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"query": map[string]any{"type": "string", "description": "words to look for; messages holding any of them are returned, best first"},
			"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": store.MaxSearchHits, "description": fmt.Sprintf("the most messages to return (default %d)", defaultSearchLimit)},
		},
		"required":             []string{"query"},
		"additionalProperties": false,
	})
	return engine.Tool{
		ToolInfo: engine.ToolInfo{
			Name: SearchToolName, Kind: engine.ToolKindContext, InputSchema: schema,
			Description: "Search the earlier messages of this conversation, including those summarized away, for words; returns message ids, roles and the matching text.",
		},
		Executor: engine.ExecutorFunc(a.search),
	}
}

func (a *Agent) search(ctx context.Context, call engine.ToolExecution) (json.RawMessage, error) {
	var in searchInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, engine.PublicError(SearchToolName+": input must be {query, limit?}", err)
	}
	if in.Limit == 0 {
		in.Limit = defaultSearchLimit
	}
	hits, err := a.deps.Store.SearchMessages(ctx, call.Principal.Tenant, call.SessionID, in.Query, in.Limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SearchToolName, err)
	}
	return json.Marshal(map[string]any{"results": hits})
}
