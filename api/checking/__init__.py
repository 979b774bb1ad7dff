"""The parser toolkit every wire format validates its body with: strict JSON and what no prompt can hold
(`json_body`), a checker that collects every located problem and the conversation a state or an input becomes
(`checker`), and images (`images`)."""
