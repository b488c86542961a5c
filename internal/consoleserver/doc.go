// Package consoleserver is the server side of the console: the inspector actor, protoactor
// remote's guard, the gRPC facade, the lifecycle feed and the Backend the engine implements.
// Only the engine and the root start it; scripts and the watchtree command reach it through
// the public client in package console, which shares this package's service name and sentinels.
package consoleserver
