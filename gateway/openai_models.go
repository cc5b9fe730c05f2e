package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// oaiModel is one entry of OpenAI's model list: an agent of this gateway.
// Created is 0 for every agent: a gateway has no creation date for an
// agent that would be the same on every replica and across restarts, and
// model pickers only sort or display it.
type oaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newOAIModel(name string) oaiModel {
	return oaiModel{ID: name, Object: "model", Created: 0, OwnedBy: "turngate"}
}

// oaiAgent resolves the model of an OpenAI request to the agent it names,
// or OpenAI's 404 model_not_found. POST /v1/chat/completions and the
// model routes resolve through it, so GET /v1/models lists exactly the
// models chat completions accepts. Every agent is open to every
// authenticated principal of any tenant (what a turn may do is the rules'
// decision, per turn).
func (s *Server) oaiAgent(model string) (*agent, error) {
	ag, ok := s.agents()[model]
	if !ok {
		return nil, &apiError{Status: http.StatusNotFound, Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist: model names an agent of this gateway.", model)}
	}
	return ag, nil
}

// listModels serves GET /v1/models: the agents oaiAgent resolves (all of
// them, whoever the caller is), sorted by name.
func (s *Server) listModels(c *gin.Context) error {
	data := make([]oaiModel, 0, len(s.agents()))
	for _, name := range slices.Sorted(maps.Keys(s.agents())) {
		data = append(data, newOAIModel(name))
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": data})
	return nil
}

// retrieveModel serves GET /v1/models/{model}. The route is a catch-all,
// so an agent whose name holds a slash (sent as %2F or as is) is found.
func (s *Server) retrieveModel(c *gin.Context) error {
	name := strings.TrimPrefix(c.Param("model"), "/")
	if _, err := s.oaiAgent(name); err != nil {
		return err
	}
	c.JSON(http.StatusOK, newOAIModel(name))
	return nil
}
