package query

import "fmt"

// Error is an error carrying a MongoDB server error code. Command handlers
// convert it to a command error reply with the same code and message.
type Error struct {
	Code int32  // server error code, e.g. 2 (BadValue)
	Msg  string // errmsg as the server would word it
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

// errf builds an *Error with a formatted message.
func errf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Codes used by this package.
const (
	codeBadValue            int32 = 2
	codeFailedToParse       int32 = 9
	codeTypeMismatch        int32 = 14
	codeNotSingleValueField int32 = 54
	codeNotImplemented      int32 = 238
)
