/// `1 device`, `2 devices`: a count and its noun, in the plural unless the count is one.
/// `plural` for the nouns that do not just take an s (`push`, `pushes`).
func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}
