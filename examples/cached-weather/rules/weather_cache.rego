# beforeToolCall: substitute a cached result without running the tool.
#
# Think:
#   if (ctx.toolName === "weather") {
#     const cached = await this.cache.get(`weather:${JSON.stringify(ctx.input)}`);
#     if (cached) return { action: "substitute", output: cached };
#   }
#
# The cache is the data file weather_cache.data.yaml, keyed by the lower-cased
# city. The model sees the cached report as the tool's output.
package turngate.tool_call

substitute := {"output": cached} if {
	input.tool.name == "weather"
	cached := data.weather_cache[lower(input.tool.input.city)]
}
