package store

import (
	"fmt"
	"strings"
	"unicode"
)

// MessageHit is one stored message a history search found.
type MessageHit struct {
	MessageID string `json:"messageId"`
	Role      string `json:"role"`
	// Snippet is the matching text around the terms, each found term in
	// [brackets].
	Snippet string `json:"snippet"`
}

// Search bounds.
const (
	// MaxSearchTerms is the most words of a query that are searched.
	MaxSearchTerms = 16
	// MaxSearchHits is the most hits a search returns.
	MaxSearchHits = 50
)

// searchTerms splits a query into its words (letters and digits), at most
// MaxSearchTerms, lowercased: the query language of both drivers is "any
// of these words", so no query can be a syntax error or an injection.
func searchTerms(query string) []string {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	if len(words) > MaxSearchTerms {
		words = words[:MaxSearchTerms]
	}
	return words
}

// searchArgs checks a SearchMessages call and returns its terms.
func searchArgs(tenant, sessionID, query string, limit int) ([]string, error) {
	if err := nonEmpty("tenant", tenant, "session id", sessionID); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxSearchHits {
		return nil, fmt.Errorf("%w: search limit %d is not within 1..%d", ErrInvalid, limit, MaxSearchHits)
	}
	terms := searchTerms(query)
	if len(terms) == 0 {
		return nil, fmt.Errorf("%w: the search query has no words", ErrInvalid)
	}
	return terms, nil
}
