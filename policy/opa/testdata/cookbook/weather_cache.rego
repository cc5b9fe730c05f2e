# Substitute a cached result without running the tool.
#
# Think (TypeScript):
#   if (ctx.toolName === "weather") {
#     const cached = await this.cache.get(`weather:${JSON.stringify(ctx.input)}`);
#     if (cached) return { action: "substitute", output: cached };
#   }
#
# Here the cache is a data document beside the policy (weather_cache.json),
# keyed by the lower-cased city.
package turngate.tool_call

substitute := {"output": cached} if {
	input.tool.name == "weather"
	cached := data.weather_cache[lower(input.tool.input.city)]
}
