package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/legorl/legorl/policy/infer"
)

// Common API errors.

func notFound(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Kind: KindNotFound, Param: param, Message: fmt.Sprintf(format, a...)}
}

func serverError(format string, a ...any) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Kind: KindServer, Message: fmt.Sprintf(format, a...)}
}

func unknownModel(model string) *apiError {
	e := notFound("model", "The model `%s` does not exist or you do not have access to it.", model)
	e.Code = "model_not_found"
	return e
}

func unknownRollout(id string) *apiError {
	e := notFound("", "proxy: no open rollout %q", id)
	e.Code = "rollout_not_found"
	return e
}

func methodNotAllowed(method string) *apiError {
	return &apiError{Status: http.StatusMethodNotAllowed, Kind: KindInvalidRequest,
		Message: fmt.Sprintf("proxy: method %s not allowed", method)}
}

func tooLarge(limit int64) *apiError {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Kind: KindInvalidRequest,
		Message: fmt.Sprintf("proxy: request body over %d bytes", limit)}
}

// engineError maps a generation error to the API error the caller gets,
// and reports whether it marks the rollout overlong or as bad output.
func engineError(err error) (e *apiError, overlong, bad bool) {
	switch {
	case errors.Is(err, infer.ErrOverlong):
		return &apiError{Status: http.StatusBadRequest, Kind: KindContextLength, Code: "context_length_exceeded",
			Param: "messages", Message: fmt.Sprintf("proxy: the prompt does not fit the model's context: %v", err)}, true, false
	case errors.Is(err, infer.ErrBadOutput):
		return serverError("proxy: the engine produced invalid output: %v", err), false, true
	case errors.Is(err, infer.ErrInput):
		return badRequest("messages", "proxy: the engine refused the request: %v", err), false, false
	case errors.Is(err, infer.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Kind: KindOverloaded,
			Message: fmt.Sprintf("proxy: the engine is closed: %v", err)}, false, false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away or timed out: nobody reads the answer,
		// but it is well-formed all the same.
		return &apiError{Status: http.StatusServiceUnavailable, Kind: KindOverloaded,
			Message: fmt.Sprintf("proxy: generation canceled: %v", err)}, false, false
	}
	return serverError("proxy: generation failed: %v", err), false, false
}
