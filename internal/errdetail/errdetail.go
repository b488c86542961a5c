// Package errdetail carries a Go error through a protobuf message (wire.ErrorDetail) and
// rebuilds it on the other side, keeping what the supervisor's classifier needs: the text, and
// for a server error its codes and labels. The stream actor's reader goroutine and the
// checkpointer use it to report the error that failed a cursor or a start. PipelineModifiedID
// reads one such error, as the stream actor and the engine's classifier both need to.
package errdetail

import (
	"errors"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/watchtree/watchtree/internal/wire"
)

// knownLabels are the error labels probed on a server error whose type does not list its labels.
var knownLabels = []string{
	"NetworkError", "NetworkTimeoutError", "RetryableWriteError", "ResumableChangeStreamError",
	"TransientTransactionError", "UnknownTransactionCommitResult", "NoWritesPerformed",
	"ExceededTimeLimitError", "SystemOverloadedError", "RetryableError",
}

// Of describes err; nil for a nil err.
func Of(err error) *wire.ErrorDetail {
	if err == nil {
		return nil
	}
	d := &wire.ErrorDetail{Text: err.Error()}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return d
	}
	d.Server = true
	for _, c := range se.ErrorCodes() {
		d.Codes = append(d.Codes, int32(c))
	}
	var ce mongo.CommandError
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	switch {
	case errors.As(err, &ce):
		d.CodeName, d.Message, d.Labels = ce.Name, ce.Message, slices.Clone(ce.Labels)
	case errors.As(err, &we):
		d.Labels = slices.Clone(we.Labels)
		if len(we.WriteErrors) > 0 {
			d.Message = we.WriteErrors[0].Message
		} else if wce := we.WriteConcernError; wce != nil {
			d.CodeName, d.Message = wce.Name, wce.Message
		}
	case errors.As(err, &bwe):
		d.Labels = slices.Clone(bwe.Labels)
	default:
		for _, l := range knownLabels {
			if se.HasErrorLabel(l) {
				d.Labels = append(d.Labels, l)
			}
		}
	}
	return d
}

// Err rebuilds the error d describes: a *ServerError for a server error, otherwise an error with
// the same text. It returns nil for a nil d.
func Err(d *wire.ErrorDetail) error {
	if d == nil {
		return nil
	}
	if !d.GetServer() {
		return errors.New(d.GetText())
	}
	e := &ServerError{Text: d.GetText()}
	for _, c := range d.GetCodes() {
		e.Codes = append(e.Codes, int(c))
	}
	e.CommandError = mongo.CommandError{Name: d.GetCodeName(), Message: d.GetMessage(), Labels: slices.Clone(d.GetLabels())}
	if len(e.Codes) > 0 {
		e.CommandError.Code = int32(e.Codes[0])
	}
	return e
}

// ServerError is a server error rebuilt from an ErrorDetail. It satisfies mongo.ServerError
// (every code of the original, its labels and message), so mongo.IsNetworkError, mongo.IsTimeout
// and errors.As find it, and it unwraps to a mongo.CommandError carrying the first code. Its
// text is the original error's.
type ServerError struct {
	// CommandError holds the first code, the code name, the server's message and the labels.
	mongo.CommandError
	// Codes are all the codes of the original error (mongo.ServerError.ErrorCodes).
	Codes []int
	// Text is the original error's text.
	Text string
}

// Error returns the original error's text.
func (e *ServerError) Error() string { return e.Text }

// Unwrap returns the CommandError, so errors.As(err, &mongo.CommandError{}) finds it.
func (e *ServerError) Unwrap() error { return e.CommandError }

// HasErrorCode reports whether code is one of Codes.
func (e *ServerError) HasErrorCode(code int) bool { return slices.Contains(e.Codes, code) }

// ErrorCodes returns Codes.
func (e *ServerError) ErrorCodes() []int { return slices.Clone(e.Codes) }

// HasErrorCodeWithMessage reports whether code is one of Codes and the message contains msg.
func (e *ServerError) HasErrorCodeWithMessage(code int, msg string) bool {
	return e.HasErrorCode(code) && strings.Contains(e.Message, msg)
}

var _ mongo.ServerError = (*ServerError)(nil)

// PipelineModifiedID reports whether err is the server's ChangeStreamFatalError (280) for an
// event whose _id (the resume token) a user pipeline stage removed or changed. The server uses
// 280 for a resume token that is no longer found too; only the message tells them apart.
func PipelineModifiedID(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(280) {
		return false
	}
	return strings.Contains(err.Error(), "_id field") && strings.Contains(err.Error(), "modified by the pipeline")
}
