// Package policyhook carries package policy's unexported plumbing (the defaults, the validators
// into a collector, the delay formula and the readers of the opaque values) to internal/policyx,
// the engine's, the root's and the actors' way to it. It exists because policyx takes policy's
// types, so policy cannot import it: policy imports this leaf instead and sets Funcs in its init,
// which runs before any package that imports policyx is initialized.
//
// Why a hook and not exported methods: what it carries is the tree's business (a user who calls
// WithDefaults or reads a StartPosition's kind has reached into the runtime), and exporting it
// from policy would make it API that outside code could depend on. The other ways out were
// worse: declaring the policies in an internal package and aliasing them from policy shows users
// `type Retry = internal.Retry` in go doc and nothing of its fields, and exported fields on the
// opaque values would let a user build a StartPosition the validators never saw. A public
// package handing unexported functions to its own internal package through a variable it sets at
// init is an established Go pattern (grpc-go's internal package is built on it); the struct
// below keeps it typed at one point, checked when the program starts.
package policyhook

// Funcs is set once, by package policy's init, to a struct of functions whose type policyx
// declares identically (an unnamed struct type with exported fields is the same type in both
// packages); policyx asserts it when it is initialized, so a mismatch fails every test at once.
var Funcs any
