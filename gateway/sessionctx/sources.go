package sessionctx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/turngate/turngate/gateway/config"
)

// source yields a static block's content.
type source interface {
	content(ctx context.Context) (string, error)
}

// textSource is inline text.
type textSource string

func (s textSource) content(context.Context) (string, error) { return string(s), nil }

// fileSource reads a file, again only when its size or modification time
// changed since the last read.
type fileSource struct {
	path string

	mu      sync.Mutex
	size    int64
	modTime time.Time
	text    string
	read    bool
}

func (s *fileSource) content(context.Context) (string, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", s.path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read && fi.Size() == s.size && fi.ModTime().Equal(s.modTime) {
		return s.text, nil
	}
	if fi.Size() > config.MaxSourceBytes {
		return "", fmt.Errorf("reading %s: %d bytes, over the %d a block may hold", s.path, fi.Size(), config.MaxSourceBytes)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", s.path, err)
	}
	s.text, s.size, s.modTime, s.read = string(b), fi.Size(), fi.ModTime(), true
	return s.text, nil
}

// httpSource GETs a URL, keeping a fetched content for the block's cache
// TTL. Concurrent turns wait for one fetch.
type httpSource struct {
	cfg    *config.HTTPBlock
	client *http.Client

	mu      sync.Mutex
	text    string
	fetched time.Time
}

func (s *httpSource) content(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fetched.IsZero() && time.Since(s.fetched) < s.cfg.CacheTTL {
		return s.text, nil
	}
	text, err := s.fetch(ctx)
	if err != nil {
		return "", err
	}
	s.text, s.fetched = text, time.Now()
	return text, nil
}

func (s *httpSource) fetch(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", s.cfg.URL, err)
	}
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("fetching %s: status %d", s.cfg.URL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, config.MaxSourceBytes+1))
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", s.cfg.URL, err)
	}
	if len(b) > config.MaxSourceBytes {
		return "", fmt.Errorf("fetching %s: over the %d bytes a block may hold", s.cfg.URL, config.MaxSourceBytes)
	}
	return string(b), nil
}
