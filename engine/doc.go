// Package engine runs an LLM agent's turn loop and dispatches the lifecycle
// hooks of Cloudflare Think's agent class (beforeTurn, beforeStep,
// beforeToolCall, afterToolCall, onStepFinish, onChunk, onChatResponse,
// onChatError) to a Hooks implementation.
//
// The engine is plain Go: it knows nothing about HTTP or rule languages. The
// gateway drives it through Engine.Run; the policy packages plug in through
// Hooks; model providers plug in through Provider; tools through Executor.
//
// The JSON field names of every exported type follow the reference (the AI
// SDK's and Think's names) so that rule authors, audit readers and clients see
// one vocabulary.
package engine
