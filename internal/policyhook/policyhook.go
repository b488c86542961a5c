// Package policyhook carries package policy's unexported plumbing (the defaults, the validators
// into a collector, the delay formula and the readers of the opaque values) to internal/policyx,
// the engine's, the root's and the actors' way to it. It exists because policyx takes policy's
// types, so policy cannot import it: policy imports this leaf instead and sets Funcs in its init,
// which runs before any package that imports policyx is initialized.
package policyhook

// Funcs is set once, by package policy's init, to a struct of functions whose type policyx
// declares identically (an unnamed struct type with exported fields is the same type in both
// packages); policyx asserts it when it is initialized, so a mismatch fails every test at once.
var Funcs any
