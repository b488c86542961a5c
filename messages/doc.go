// Package messages holds the protobuf messages the actors of a stream tree exchange. It is
// generated from proto/ by `make proto`; the generated code is committed.
package messages
