"""Fresh mistakes in the pieces of solutions/*.py, written as a learner would make them, without
reading the course's own lists of typical mistakes; and unusual but correct variants.

Each entry is one piece of one file, patched: M(id, piece, patches, truth, named) where piece is
"activity.piece" (the file is solutions/<activity>.py), patches a list of (old, new) text
replacements (each old text occurs exactly once in the file), truth what the mistake is in plain
words, and named a list of regular expressions (case-insensitive): a box names the mistake
precisely when one of them matches its text. V(id, piece, patches, note) is a correct variant:
its piece must pass. tools/fresh_mistakes.py runs them.
"""
from dataclasses import dataclass, field


@dataclass
class M:
    id: str
    piece: str
    patches: list
    truth: str
    named: list = field(default_factory=list)


@dataclass
class V:
    id: str
    piece: str
    patches: list
    note: str



MISTAKES = [
    # ------------------------------------------------------------------ embeddings
    M("s14_embeddings_lookup_flattened", "embeddings.embed_lookup",
      [("    return table[ids]\n", "    return table[ids.reshape(-1)]\n")],
      "Flattens the ids before indexing, so the result is (B*T, D) instead of (B, T, D): the batch and "
      "time axes of the ids are lost.",
      [r"flatten", r"reshape\(-1\)|view\(-1\)", r"\(B ?[·*x×] ?T, ?D\)", r"(batch|time|position) ax[ie]s.{0,40}(lost|merged|collapsed|gone)"]),
    M("s14_embeddings_onehot_no_num_classes", "embeddings.embed_onehot",
      [("    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)",
        "    one_hot = F.one_hot(ids).to(table.dtype)")],
      "Calls F.one_hot without num_classes, so the one-hot vectors are as long as the largest id in the batch "
      "plus one instead of V; unless id V-1 occurs, the product with the (V, D) table fails on sizes.",
      [r"num_classes", r"(largest|max(imum)?|highest|biggest) id", r"(length|width|size) .{0,40}(not|instead of|rather than) V\b"]),
    M("s14_embeddings_onehot_float32", "embeddings.embed_onehot",
      [("    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)",
        "    one_hot = F.one_hot(ids, num_classes=table.shape[0]).float()")],
      "Converts the one-hot matrix with .float() (always float32) instead of to the table's dtype, so a "
      "float64, bf16 or fp16 table makes the matrix product fail on mixed dtypes.",
      [r"\.float\(\)", r"float32", r"table'?s (own )?(d)?type", r"float64|double|bfloat16|bf16|fp16|half"]),
    M("s14_embeddings_positions_ignore_start", "embeddings.add_positions",
      [("    return tok + position_table[start:start + T]    # (T, D) broadcasts over B",
        "    return tok + position_table[:T]    # (T, D) broadcasts over B")],
      "Always takes the first T rows of the position table, ignoring start, so tokens after a KV cache get "
      "the positions 0 .. T-1 again instead of start .. start+T-1.",
      [r"\bstart\b", r"offset", r"cach(e|ed)"]),
    M("s14_embeddings_positions_inplace", "embeddings.add_positions",
      [("    return tok + position_table[start:start + T]    # (T, D) broadcasts over B",
        "    tok += position_table[start:start + T]    # (T, D) broadcasts over B\n    return tok")],
      "Adds the positions in place with +=, which overwrites the caller's token embeddings (and raises under "
      "autograd when tok is a leaf that requires grad).",
      [r"in[- ]place", r"\+=", r"(modif|overwrit|mutat|chang|alter)\w* (the )?(caller'?s|input|tok|token embeddings)"]),
    M("s14_embeddings_cosine_global_norm", "embeddings.cosine_similarity",
      [("    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)",
        "    return dot / (u.norm() * v.norm()).clamp_min(eps)")],
      "Takes the norms without dim=-1, i.e. the norm of the whole tensor, so for a batch of vectors every dot "
      "product is divided by the same global length and the results are not cosines.",
      [r"dim=-1", r"whole tensor|entire tensor|all (the )?(vectors|rows|elements)", r"global|single (scalar|number)|one (scalar|number) for"]),
    M("s14_embeddings_cosine_no_eps", "embeddings.cosine_similarity",
      [("    return dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)",
        "    return dot / (u.norm(dim=-1) * v.norm(dim=-1))")],
      "Drops the eps floor under the denominator, so a zero vector gives 0/0 = NaN instead of 0.",
      [r"\bnan\b", r"zero vector|all-?zeros?", r"divi\w* by zero|0 ?/ ?0", r"\beps\b|clamp"]),
    M("s14_embeddings_nearest_values", "embeddings.nearest_tokens",
      [("    return torch.topk(scores, k).indices              # (k,), the largest score first",
        "    return torch.topk(scores, k).values              # (k,), the largest score first")],
      "Returns the k best similarity scores (topk's .values) instead of their positions, the token ids "
      "(.indices).",
      [r"\.values", r"\.indices", r"scores? (themselves|instead of)|similarit(y|ies) (values )?instead of", r"instead of (the )?(ids|indices)|not (the )?(ids|indices)"]),
    M("s14_embeddings_nearest_dot_product", "embeddings.nearest_tokens",
      [("    scores = cosine_similarity(table, query)          # (V, D) with (D,) -> (V,)",
        "    scores = table @ query                            # (V, D) with (D,) -> (V,)")],
      "Ranks the rows by their raw dot product with the query instead of the cosine, so long rows (large "
      "norm) win whatever their direction.",
      [r"dot product", r"(not|instead of|rather than) (the )?cosine|cosine_similarity", r"(norm|length|magnitude)s? of the rows|long(er)? rows|row (norm|length)"]),
    M("s14_embeddings_module_no_start", "embeddings.Embeddings",
      [("        x = add_positions(embed_lookup(self.token_table, ids), self.position_table, start)\n",
        "        x = add_positions(embed_lookup(self.token_table, ids), self.position_table)\n")],
      "Does not pass start on to add_positions, so with a KV cache the new tokens get positions from 0 "
      "instead of after the cached ones.",
      [r"\bstart\b", r"cach(e|ed)", r"position 0|from (zero|0)|always (at|from) (zero|0)"]),

    # ------------------------------------------------------------------ attention
    M("s14_attention_average_excludes_self", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)",
        "    return torch.stack([x[..., :i, :].mean(dim=-2) for i in range(T)], dim=-2)")],
      "Slices x[..., :i, :], leaving out position i itself: row 0 is the mean of nothing (NaN) and every "
      "other row averages only the strict past.",
      [r":i\b|:i,", r"(exclud|leav|omit|miss|skip)\w* (out )?(position i|itself|the current|the diagonal|its own)", r"\bnan\b|empty (slice|set)|mean of (an )?empty|mean of nothing", r"off[- ]by[- ]one"]),
    M("s14_attention_average_cumsum_over_T", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)",
        "    return torch.cumsum(x, dim=-2) / T")],
      "Divides the running sum by T, the whole length, instead of by i + 1, the number of positions row i "
      "has seen; only the last row is right.",
      [r"divid\w* by T\b|/ ?T\b", r"i ?\+ ?1", r"(number|count) of (positions|rows|elements|tokens)( seen| so far| summed)"]),
    M("s14_attention_cavg_triu", "attention.causal_average_weights",
      [("    w = torch.tril(torch.ones(T, T))                 # (T, T), row i: i + 1 ones",
        "    w = torch.triu(torch.ones(T, T))                 # (T, T), row i: i + 1 ones")],
      "Uses torch.triu instead of torch.tril, so row i averages position i and every later one (the "
      "future) instead of the past.",
      [r"triu", r"upper[- ]triang", r"future|later positions", r"transpos"]),
    M("s14_attention_csoft_fill_zero", "attention.causal_softmax_weights",
      [('    scores = torch.zeros(T, T).masked_fill(future, float("-inf"))',
        "    scores = torch.zeros(T, T).masked_fill(future, 0.0)")],
      "Fills the future with 0 instead of -inf; every score is already 0, so the mask does nothing and "
      "each row becomes uniform, 1/T on every position, future included.",
      [r"-inf|minus infinity|negative infinity", r"(fill|writ|set)\w* (it |them )?(with |to )?(0|zero)", r"uniform|1 ?/ ?T|mask (does|has) no(thing| effect)"]),
    M("s14_attention_csoft_mask_past", "attention.causal_softmax_weights",
      [("    future = torch.tril(torch.ones(T, T)) == 0       # (T, T), True above the diagonal",
        "    future = torch.tril(torch.ones(T, T)) == 1       # (T, T), True above the diagonal")],
      "Builds the mask with == 1, which marks the past and the diagonal instead of the future: the weight "
      "goes to the future and the last row is all -inf, which gives NaN.",
      [r"== ?1", r"invert|revers|opposite|flip", r"(mask|hid|block)\w* the past|keeps? the future", r"\bnan\b"]),
    M("s14_attention_scores_elementwise", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n", "    return (q * k).sum(-1)\n")],
      "Multiplies q and k elementwise and sums over K, which gives only q_i·k_i for matching positions (a "
      "(..., T) vector, and only when S = T) instead of the (T, S) table of every query with every key.",
      [r"element-?wise", r"diagonal|matching positions|same position|q_i ?· ?k_i", r"every (query|pair)|all pairs|\(T, ?S\) (table|matrix)"]),
    M("s14_attention_scale_by_K", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n", "    return scores / d_head\n")],
      "Divides the scores by the head width K itself instead of by its square root, shrinking them far too "
      "much.",
      [r"sqrt|square root|√", r"by K\b|by d_head|head width itself"]),
    M("s14_attention_scale_precedence", "attention.scale_scores",
      [("    return scores / math.sqrt(d_head)\n", "    return scores / d_head ** 1 / 2\n")],
      "Writes d_head ** 1 / 2, which Python reads as (d_head ** 1) / 2, so the scores are divided by K and "
      "then halved instead of divided by sqrt(K).",
      [r"precedence", r"\*\* ?1 ?/ ?2", r"halv|divid\w* by 2\b", r"\*\* ?\(1 ?/ ?2\)|\*\* ?0\.5"]),
    M("s14_attention_causal_mask_no_offset", "attention.causal_mask",
      [("    return j <= i + (S - T)\n", "    return j <= i\n")],
      "Ignores the S - T cached keys and compares key j with the query's row number instead of its absolute "
      "position, so with a cache each query sees too few keys.",
      [r"S ?- ?T", r"offset", r"cach(e|ed)", r"absolute position"]),
    M("s14_attention_causal_mask_strict", "attention.causal_mask",
      [("    return j <= i + (S - T)\n", "    return j < i + (S - T)\n")],
      "Uses a strict < so that a query may not look at its own position: the diagonal is False, and without "
      "a cache row 0 has no allowed key at all.",
      [r"strict", r"diagonal", r"(its )?own (position|key)|itself", r"<="]),
    M("s14_attention_apply_mask_not_inverted", "attention.apply_causal_mask",
      [('    return scores.masked_fill(~allowed, float("-inf"))',
        '    return scores.masked_fill(allowed, float("-inf"))')],
      "Forgets the ~ in front of the mask of allowed keys, so the past and the diagonal are set to -inf and "
      "only the future survives (the last row becomes all -inf, NaN after the softmax).",
      [r"~|invert|negat", r"allowed (positions|keys|entries|ones) (are |get )?(masked|set to -inf|hidden)|mask\w* the allowed", r"(mask|hid)\w* the past|keeps? (only )?the future|opposite"]),
    M("s14_attention_softmax_sum_no_keepdim", "attention.softmax",
      [("    return e / e.sum(dim=-1, keepdim=True)\n    ### END SOLUTION\n\n\ndef weighted_sum",
        "    return e / e.sum(dim=-1)\n    ### END SOLUTION\n\n\ndef weighted_sum")],
      "Sums without keepdim=True, so the row totals broadcast along the key axis: entry [i, j] is divided by "
      "row j's total instead of row i's (or the shapes fail when T != S).",
      [r"keepdim", r"broadcast\w* (along|over|across|against) the (wrong|key|last)", r"row j|wrong row|another row|each column"]),
    M("s14_attention_softmax_max_tuple", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)", "    z = scores - scores.max(dim=-1, keepdim=True)")],
      "Uses .max(dim=-1, keepdim=True), which returns a (values, indices) pair rather than a tensor, so the "
      "subtraction raises a TypeError.",
      [r"amax", r"\.values", r"namedtuple|named tuple|\(values, ?indices\)|values and indices", r"return_types"]),
    M("s14_attention_softmax_no_shift", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)", "    z = scores")],
      "Skips subtracting the row maximum, so large scores overflow exp to inf and the row becomes NaN "
      "(inf / inf).",
      [r"overflow", r"(subtract|shift)\w* (the |each )?(row'?s? )?(max|largest)", r"inf ?/ ?inf|\bnan\b", r"stab"]),
    M("s14_attention_weighted_sum_transposed", "attention.weighted_sum",
      [("    return weights @ v\n", "    return weights.transpose(-2, -1) @ v\n")],
      "Transposes the weight table before the product, so output i mixes the values with column i's weights "
      "(what key i receives) instead of query i's row; it fails when T != S.",
      [r"transpos", r"column", r"(query|row) i'?s? (row|weights)|rows? of (the )?weights"]),
    M("s14_attention_attention_always_masked", "attention.attention",
      [("    if causal:\n        scores = apply_causal_mask(scores)\n", "    scores = apply_causal_mask(scores)\n")],
      "Applies the causal mask whatever the causal argument says, so causal=False still hides the future keys.",
      [r"causal ?= ?False|causal (argument|flag|parameter)", r"always (mask|appl)", r"ignor\w* (the )?causal", r"non-?causal"]),
    M("s14_attention_attention_scale_T", "attention.attention",
      [("    scores = scale_scores(attention_scores(q, k), q.shape[-1])",
        "    scores = scale_scores(attention_scores(q, k), q.shape[-2])")],
      "Scales by sqrt(q.shape[-2]), the number of queries T, instead of sqrt of the head width K "
      "(q.shape[-1]).",
      [r"shape\[-2\]", r"number of (queries|positions)|sequence length|\bT\b instead of K", r"head width|shape\[-1\]"]),
    M("s14_attention_head_not_causal", "attention.AttentionHead",
      [("        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)\n",
        "        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=False)\n")],
      "Calls attention with causal=False, so every position also attends to the future tokens.",
      [r"causal ?= ?False|not causal|non-?causal", r"future (tokens|positions|keys)", r"without (the )?(causal )?mask"]),
    M("s14_attention_head_k_v_swapped", "attention.AttentionHead",
      [("        return attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=True)\n",
        "        return attention(self.w_q(x), self.w_v(x), self.w_k(x), causal=True)\n")],
      "Passes the value projection as the keys and the key projection as the values, so the scores use w_v "
      "and the output mixes w_k's vectors.",
      [r"swap", r"w_v.{0,40}(as|for) (the )?keys?|w_k.{0,40}(as|for) (the )?values?|value projection (as|for) (the )?keys|key projection (as|for) (the )?values", r"(keys?|values?) and (values?|keys?).{0,30}(wrong order|reversed|exchanged|swapped)"]),

    # ------------------------------------------------------------------ multihead
    M("s14_multihead_split_direct_view", "multihead.split_heads",
      [("    return x.view(B, T, n_heads, HK // n_heads).transpose(1, 2)\n",
        "    return x.view(B, n_heads, T, HK // n_heads)\n")],
      "Views (B, T, H*K) straight as (B, H, T, K) without the transpose, so each head's block of memory runs "
      "across positions: positions and heads are mixed.",
      [r"mix\w* (up )?(positions|heads)|positions and heads", r"without (the |a )?transpos|transpose\(1, ?2\)", r"memory order|straight to|directly", r"view\(B, ?n_heads"]),
    M("s14_multihead_merge_view", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return x.transpose(1, 2).view(B, T, H * K)\n")],
      "Fuses the axes with .view after the transpose; the transposed tensor is not contiguous, so view raises "
      "a RuntimeError.",
      [r"non-?contiguous|not contiguous", r"\.view\b", r"contiguous\(\)|reshape"]),
    M("s14_multihead_merge_no_transpose", "multihead.merge_heads",
      [("    return x.transpose(1, 2).reshape(B, T, H * K)\n", "    return x.reshape(B, T, H * K)\n")],
      "Reshapes (B, H, T, K) straight to (B, T, H*K) without first bringing the positions back in front of "
      "the heads, so each output row mixes several positions of one head.",
      [r"without (the |a )?transpos|transpose\(1, ?2\)|forg\w* .{0,20}transpos", r"mix\w* (up )?(several |different )?(positions|heads)|positions and heads", r"memory order", r"(positions|T) back in front|in front of the heads"]),
    M("s14_multihead_mha_chunk", "multihead.MultiHeadAttention",
      [("        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)   # (B, T, H·K), (B, T, G·K) x2",
        "        q, k, v = self.qkv(x).chunk(3, dim=-1)   # (B, T, H·K), (B, T, G·K) x2")],
      "Cuts the fused projection into three equal parts with chunk(3), which is right only when G = H; with "
      "grouped key/value heads the queries, keys and values are cut at the wrong places.",
      [r"chunk", r"equal (parts|pieces|thirds|sizes)|three equal", r"group|kv_heads|\bG ?(!=|≠|<) ?H|G ?\* ?K"]),
    M("s14_multihead_mha_q_split_G", "multihead.MultiHeadAttention",
      [("        q, k, v = split_heads(q, H), split_heads(k, G), split_heads(v, G)  # (B, H|G, T, K)",
        "        q, k, v = split_heads(q, G), split_heads(k, G), split_heads(v, G)  # (B, H|G, T, K)")],
      "Splits the queries into G heads instead of H, so with grouped key/value heads (G < H) there are too "
      "few, too wide query heads.",
      [r"split_heads\(q, ?G\)", r"G instead of H|kv_heads for (the )?quer|G (query )?heads", r"query heads"]),
    M("s14_multihead_mha_skip_cache_and_share", "multihead.MultiHeadAttention",
      [("        k, v = self.cache_and_share(k, v, cache)                        # (B, H, S, K)\n", "")],
      "Never calls self.cache_and_share, so the KV cache is ignored during generation and grouped key/value "
      "heads are never repeated for their query heads.",
      [r"cache_and_share", r"ignor\w* (the )?(kv )?cache|cache (is )?(ignored|never|not)", r"repeat_kv|shar\w* (the )?(key|kv)|repeat\w* (the )?(key|kv)"]),
    M("s14_multihead_entropy_plain_log", "multihead.head_entropy",
      [("    per_query = -torch.xlogy(weights, weights).sum(dim=-1)            # (B, H, T)",
        "    per_query = -(weights * weights.log()).sum(dim=-1)            # (B, H, T)")],
      "Computes w·log w directly: masked keys have weight exactly 0, log 0 = -inf and 0·(-inf) = NaN, so any "
      "causal pattern's entropy becomes NaN.",
      [r"\bnan\b", r"log ?\(?0\)?|0 ?[·*] ?log|0 ?[·*] ?\(?-?inf", r"xlogy|entr", r"zero weights"]),
    M("s14_multihead_entropy_mean_heads", "multihead.head_entropy",
      [("    return per_query.mean(dim=(0, 2))                                  # (H,)",
        "    return per_query.mean(dim=(0, 1))                                  # (H,)")],
      "Averages over the batch and the head axes (0, 1) instead of the batch and the query axes (0, 2), so it "
      "returns one number per query position instead of one per head.",
      [r"dim=\(0, ?1\)", r"(averag|mean)\w* (over|across) (the )?heads", r"per (query|position)|one (number|value) per (query|position)", r"\(0, ?2\)"]),

    # ------------------------------------------------------------------ mlp
    M("s14_mlp_gelu_tanh_inverted_const", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))",
        "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(math.pi / 2.0) * (x + 0.044715 * x ** 3)))")],
      "Uses sqrt(pi / 2) instead of sqrt(2 / pi) as the scale inside the tanh (the fraction upside down), so "
      "the curve is too sharp.",
      [r"pi ?/ ?2|π ?/ ?2", r"invert|upside", r"sqrt\(2 ?/ ?(pi|π)\)|√\(?2 ?/ ?π"]),
    M("s14_mlp_gelu_tanh_square", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))",
        "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 2)))")],
      "Squares x instead of cubing it in the 0.044715 term, which breaks GELU's shape for negative inputs.",
      [r"x ?\*\* ?2|x²|x\^2", r"cube|cubic|x³|x\^3|\*\* ?3", r"squar"]),
    M("s14_mlp_gelu_erf_no_sqrt2", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))", "    return 0.5 * x * (1.0 + torch.erf(x))")],
      "Forgets to divide x by sqrt(2) inside the error function, so the curve is the CDF of a normal with "
      "the wrong variance.",
      [r"sqrt ?\(2|√ ?2|square root of (2|two)", r"erf\(x\)"]),
    M("s14_mlp_gelu_erf_cdf_only", "mlp.gelu_erf",
      [("    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))", "    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))")],
      "Returns Phi(x), the normal CDF alone, forgetting to multiply it by x.",
      [r"\bPhi\b|Φ|CDF|cumulative", r"(forg|miss|without|drop)\w* .{0,30}\bx\b|multipl\w* (it )?by x", r"x ?[·*] ?(Phi|Φ)"]),
    M("s14_mlp_gelu_grad_no_x", "mlp.gelu_grad",
      [("    return cdf + x * pdf                                                # product rule: 1·Phi + x·phi",
        "    return cdf + pdf                                                    # product rule: 1·Phi + x·phi")],
      "Applies the product rule without the factor x on the density term: Phi(x) + phi(x) instead of "
      "Phi(x) + x·phi(x).",
      [r"product rule", r"x ?[·*] ?(pdf|phi|φ)", r"(forg|miss|without|drop)\w* .{0,30}\bx\b"]),
    M("s14_mlp_gelu_grad_exp_no_half", "mlp.gelu_grad",
      [("    pdf = torch.exp(-0.5 * x ** 2) / math.sqrt(2.0 * math.pi)           # phi(x) = Phi'(x)",
        "    pdf = torch.exp(-x ** 2) / math.sqrt(2.0 * math.pi)                 # phi(x) = Phi'(x)")],
      "Writes the normal density as exp(-x²)/sqrt(2π), forgetting the 1/2 in the exponent, so the bell "
      "curve is too narrow and the slope is wrong away from 0.",
      [r"x ?\*\* ?2 ?/ ?2|x²/2|x\^2/2", r"(half|0\.5|1/2).{0,30}exponent|exponent.{0,40}(half|0\.5|1/2)", r"exp\(-x ?\*\* ?2\)|exp\(-x²\)|exp\(-x\^2\)"]),
    M("s14_mlp_mlp_gelu_after_proj", "mlp.MLP",
      [("        return self.proj(self.gelu(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)",
        "        return self.gelu(self.proj(self.fc(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)")],
      "Applies GELU after the output projection instead of between the two linear layers, so the two layers "
      "collapse into one linear map and the output is squashed by GELU.",
      [r"after (the )?(second|output|proj|last)", r"between (the )?(two )?(linear )?layers", r"collaps", r"wrong order|order of (the )?(operations|layers)"]),

    # ------------------------------------------------------------------ block
    M("s14_block_ln_unbiased_var", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased",
        "    var = x.var(dim=-1, keepdim=True)                          # (..., 1), biased")],
      "Uses Tensor.var's default, the unbiased variance (divided by D - 1), instead of the biased one "
      "(divided by D).",
      [r"unbiased", r"D ?- ?1", r"bessel|correction", r"biased"]),
    M("s14_block_ln_eps_outside", "block.layer_norm",
      [("    y = (x - mean) / torch.sqrt(var + eps)\n", "    y = (x - mean) / (torch.sqrt(var) + eps)\n")],
      "Adds eps after the square root instead of under it, which changes the result for rows of small "
      "variance.",
      [r"eps.{0,40}(outside|after (the )?(sqrt|square root))", r"(outside|inside|under) the (sqrt|square root)", r"sqrt\(var\) ?\+ ?eps"]),
    M("s14_block_ln_bias_none", "block.layer_norm",
      [("    return y + bias if bias is not None else y\n", "    return y + bias\n")],
      "Always adds the bias, so a LayerNorm without bias (bias=None) raises a TypeError.",
      [r"\bNone\b", r"(no|without a?) bias", r"optional"]),
    M("s14_block_dropout_no_rescale", "block.dropout",
      [("    return x * keep / (1 - p)\n", "    return x * keep\n")],
      "Zeroes the dropped elements but does not divide the kept ones by 1 - p, so the expected value of "
      "every element shrinks by a factor 1 - p.",
      [r"1 ?- ?p", r"rescal|scal\w* (up|back)", r"expected value|mean (shrinks|is not kept|drops)"]),
    M("s14_block_dropout_p_one_nan", "block.dropout",
      [("    if p == 1:\n        return torch.zeros_like(x)                              # 1 / (1 - p) would be 1/0\n", "")],
      "Drops the special case p = 1: every element is dropped and then divided by 1 - p = 0, giving 0/0 = "
      "NaN instead of zeros.",
      [r"p ?(==|=|is) ?1", r"\bnan\b", r"divi\w* by zero|1 ?/ ?0|0 ?/ ?0"]),
    M("s14_block_dropout_keep_below_p", "block.dropout",
      [("    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p   # same shape as x, True w.p. 1 - p",
        "    keep = torch.rand(x.shape, generator=generator, device=x.device) < p   # same shape as x, True w.p. 1 - p")],
      "Keeps an element when its random number is below p, i.e. with probability p instead of 1 - p, so it "
      "keeps and drops the wrong fraction.",
      [r"< ?p\b", r"probability p\b|keeps? (with probability )?p\b", r"(drop|zero)\w* .{0,20}1 ?- ?p|wrong fraction|invert"]),
    M("s14_block_dropout_ignores_training", "block.dropout",
      [("    if not training or p == 0:\n        return x\n", "    if p == 0:\n        return x\n")],
      "Ignores the training flag, so dropout also zeroes elements in evaluation (training=False).",
      [r"(ignor|disregard|forg)\w* (the )?training|training ?= ?False|not training", r"eval(uation)? mode|in eval(uation)?|at inference|during inference"]),
    M("s14_block_block_residual_normalised", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n        x = x + self.drop(self.mlp(self.ln2(x)))\n",
        "        x = self.ln1(x)\n        x = x + self.drop(self.attn(x, cache))\n        x = self.ln2(x)\n        x = x + self.drop(self.mlp(x))\n")],
      "Replaces the stream by its normalised copy before each sublayer, so the sublayer's output is added "
      "to the normalised x instead of the raw residual stream.",
      [r"normali[sz]ed (stream|x|input|copy|version)", r"raw (stream|x|residual|input)", r"residual (path|stream|connection)"]),
    M("s14_block_block_drops_cache", "block.Block",
      [("        x = x + self.drop(self.attn(self.ln1(x), cache))\n", "        x = x + self.drop(self.attn(self.ln1(x)))\n")],
      "Does not pass the cache to the attention, so during generation with a KV cache each step only sees "
      "its own new tokens.",
      [r"(ignor|drop|never pass|not pass|forg|lost|omit|miss)\w* .{0,25}cache", r"cache (is |was )?(never|not) (passed|given|used|forwarded)"]),
    M("s14_block_postnorm_norms_sublayer", "block.PostNormBlock",
      [("        x = self.ln1(x + self.drop(self.attn(x, cache)))\n        x = self.ln2(x + self.drop(self.mlp(x)))\n",
        "        x = x + self.ln1(self.drop(self.attn(x, cache)))\n        x = x + self.ln2(self.drop(self.mlp(x)))\n")],
      "Normalises each sublayer's output before adding it instead of normalising the sum x + sublayer(x); "
      "the stream itself is never normalised.",
      [r"(sublayer|attention|mlp)'?s? output", r"(not|instead of) (normali[sz]\w* )?the sum|the sum (is|was) (not|never)", r"before (the |it is )?add"]),

    # ------------------------------------------------------------------ model
    M("s14_model_init_python_list", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = [Block(cfg) for _ in range(cfg.n_layers)]\n")],
      "Keeps the blocks in a plain Python list, so they are not registered as submodules: their parameters "
      "are missing from model.parameters() and the state dict, are not initialised by reset_parameters and "
      "do not move with .to().",
      [r"ModuleList", r"plain (Python )?list|python list", r"(not|never) registered|unregistered|hidden from", r"parameters\(\)|state_dict|state dict"]),
    M("s14_model_init_same_block", "model.ANDREA",
      [("        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))\n",
        "        self.blocks = nn.ModuleList([Block(cfg)] * cfg.n_layers)\n")],
      "Repeats one Block object L times, so every layer is the same module with the same weights: the model "
      "has a single block's parameters, applied L times.",
      [r"same (block|module|instance|object)", r"shar\w* (the same )?(weights|parameters)", r"\[Block\(cfg\)\] ?\*", r"(one|single) block'?s? (parameters|weights)"]),
    M("s14_model_init_head_always", "model.ANDREA",
      [("        self.head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)\n",
        "        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)\n")],
      "Always creates the output head, even when cfg.tie_embeddings asks for tying; output_weight then uses "
      "the separate head, so the token table is not shared and the model has V*D extra parameters.",
      [r"\bti(e|ed|ing)\b|tie_embeddings", r"V ?[·*×] ?D (extra|more)|extra (V|parameters)"]),
    M("s14_model_forward_no_final_norm", "model.ANDREA",
      [("        x = self.ln_f(x)\n", "")],
      "Skips the final norm ln_f, so the logits are computed from the unnormalised residual stream.",
      [r"ln_f", r"final (norm|layer ?norm|normali)"]),
    M("s14_model_forward_start_zero", "model.ANDREA",
      [("        x = self.embed(ids, start)                                   # (B, T, D)",
        "        x = self.embed(ids)                                          # (B, T, D)")],
      "Does not pass start to the embeddings, so during cached generation every new token gets position 0 "
      "instead of the position after the cache.",
      [r"\bstart\b", r"cach(e|ed) (positions|tokens)|after the cache", r"position 0|from (zero|0)"]),
    M("s14_model_forward_cache_zero", "model.ANDREA",
      [("            x = block(x, caches[i] if caches else None)              # (B, T, D)",
        "            x = block(x, caches[0] if caches else None)              # (B, T, D)")],
      "Hands every block the first cache, caches[0], instead of its own caches[i], so all blocks write into "
      "and read from the same cache.",
      [r"caches\[0\]", r"same cache|one cache|first (block'?s )?cache", r"(own|its) cache|cache (number|index) i|caches\[i\]"]),
    M("s14_model_count_no_qkv_bias", "model.count_parameters",
      [("    attention = D * qkv_out + b * qkv_out + D * D + b * D       # W_qkv, b_qkv, W_O, b_O",
        "    attention = D * qkv_out + D * D + b * D                     # W_qkv, b_qkv, W_O, b_O")],
      "Leaves out the biases of the fused q, k, v projection (b * qkv_out), undercounting attention when the "
      "config has biases.",
      [r"b_qkv|qkv bias|bias(es)? of the (fused |qkv |q, ?k, ?v )?projection", r"b ?\* ?qkv_out", r"(query|key|value|qkv) bias"]),
    M("s14_model_count_ignores_groups", "model.count_parameters",
      [("    qkv_out = (H + 2 * G) * K\n", "    qkv_out = 3 * D\n")],
      "Counts the fused projection's output as 3D, as if there were as many key/value heads as query heads; "
      "with grouped key/value heads (G < H) it overcounts.",
      [r"\bG\b|kv_heads|key/value heads", r"group", r"3 ?\* ?D|\b3D\b|three times D"]),
    M("s14_model_count_rmsnorm_bias", "model.count_parameters",
      [('    norm = D + (D * b if cfg.norm == "layernorm" else 0)        # gamma (+ beta)',
        "    norm = D + D * b                                             # gamma (+ beta)")],
      "Gives every norm a bias when the config has biases, but RMSNorm has only a gain, so rmsnorm configs "
      "with bias are overcounted.",
      [r"rms ?norm", r"(no|without( a)?) (bias|beta|shift)", r"\bbeta\b|\bshift\b"]),
    M("s14_model_sample_argmax_flat", "model.sample_next",
      [("        return logits.argmax(dim=-1, keepdim=True)                     # (B, 1)",
        "        return logits.argmax(dim=-1)                                   # (B, 1)")],
      "Takes the greedy argmax without keepdim=True, so temperature 0 returns shape (B,) instead of (B, 1).",
      [r"keepdim", r"\(B,\)", r"\(B, ?1\)"]),
    M("s14_model_sample_topk_strict", "model.sample_next",
      [('        logits = logits.masked_fill(logits < kth, float("-inf"))',
        '        logits = logits.masked_fill(logits <= kth, float("-inf"))')],
      "Masks every logit <= the k-th largest, which also removes the k-th itself and its ties, keeping only "
      "k - 1 tokens (none for top_k = 1, which makes the probabilities NaN).",
      [r"<=", r"k-?th (largest )?(itself|value|logit)|ties?\b", r"k ?- ?1", r"\bnan\b"]),
    M("s14_model_sample_topk_beyond_vocab", "model.sample_next",
      [("        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)",
        "        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]   # (B, 1)")],
      "Passes top_k to torch.topk without capping it at the vocabulary size, so a top_k larger than V raises "
      "instead of keeping every token.",
      [r"min\(", r"(larger|more|greater|bigger) than (the )?(vocab\w*|V\b)|exceeds|beyond (the )?vocab|top_k ?(>|>=) ?V", r"out of range|cap"]),
    M("s14_model_kvcache_no_advance", "model.KVCache",
      [("        self.pos += T\n", "")],
      "Never moves self.pos on: every update writes at the same slots and returns the slots before pos, so "
      "the first call returns nothing and the cache never grows.",
      [r"self\.pos ?\+= ?T|pos ?\+= ?T", r"pos(ition)?.{0,30}(never|not) (advanc|mov|updat|increment|grow)|(never|not|doesn'?t|forg\w* to) (mov|advanc|updat|increment)\w* (self\.)?pos", r"counter"]),
    M("s14_model_kvcache_return_new", "model.KVCache",
      [("        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos",
        "        return k, v                                                   # (B, G, S, K), S = pos")],
      "Returns only the keys and values just passed in instead of every position cached so far, so attention "
      "during generation never sees the earlier tokens.",
      [r"only (the )?new", r"(all|every) (the )?(cached|filled|earlier)|earlier (tokens|positions)|cached (keys|ones|positions)", r":self\.pos"]),

    # ------------------------------------------------------------------ modern
    M("s14_modern_rms_subtracts_mean", "modern.rms_norm",
      [("    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)",
        "    xw = xw - xw.mean(dim=-1, keepdim=True)\n    y = xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)     # one reduction: mean(x²)")],
      "Centres each token by subtracting its mean before dividing, which turns RMSNorm into a LayerNorm "
      "without bias.",
      [r"subtract\w* (the |its )?mean|centr|mean subtraction", r"layer ?norm"]),
    M("s14_modern_rms_no_cast_back", "modern.rms_norm",
      [("    return (y * weight.to(wide)).to(x.dtype)\n", "    return y * weight.to(wide)\n")],
      "Does not cast the result back to x's dtype, so a bf16 or fp16 input comes back as float32.",
      [r"cast\w* (it )?back|x'?s (own )?dtype|input'?s (own )?(d)?type", r"(returns?|stays?|left|comes back) (in |as )?(fp32|float32)", r"\.to\(x\.dtype\)"]),
    M("s14_modern_hidden_round_down", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return multiple_of * (8 * d_model // 3 // multiple_of)\n")],
      "Rounds 8D/3 down to a multiple of multiple_of with floor division instead of up, so the hidden width "
      "is too small (and can be 0).",
      [r"round\w* down|floor", r"//", r"ceil|round\w* up"]),
    M("s14_modern_swiglu_swapped", "modern.swiglu",
      [("    return F.silu(gate) * up\n", "    return F.silu(up) * gate\n")],
      "Puts the value through Swish and multiplies by the raw gate, the two inputs swapped.",
      [r"swap", r"silu\(up\)|swish of (the )?(up|value)", r"(value|up) (goes |is put )?through (the )?(swish|silu)", r"gate (is )?used as (the )?value"]),
    M("s14_modern_swiglu_sigmoid_gate", "modern.swiglu",
      [("    return F.silu(gate) * up\n", "    return torch.sigmoid(gate) * up\n")],
      "Uses sigmoid(gate) instead of Swish(gate) = gate·sigmoid(gate), forgetting the factor gate: that is "
      "GLU, not SwiGLU.",
      [r"\bGLU\b", r"sigmoid (alone|only)|only (the )?sigmoid|just (the )?sigmoid|plain sigmoid", r"(forg|miss|without)\w* .{0,30}(factor|gate ?[·*]|z ?[·*])"]),
    M("s14_modern_SwiGLU_args_swapped", "modern.SwiGLU",
      [("        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)",
        "        return self.w_down(self.swiglu(self.w_up(x), self.w_gate(x)))   # (B, T, D) -> (B, T, F) -> (B, T, D)")],
      "Passes w_up's output as the gate and w_gate's as the value, the arguments of swiglu in the wrong "
      "order.",
      [r"swap", r"w_up.{0,30}(as|for) (the )?gate|w_gate.{0,30}(as|for) (the )?value", r"order of (the )?arguments|argument order|wrong order"]),
    M("s14_modern_kvbytes_keys_only", "modern.kv_cache_bytes",
      [("    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "    return cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n")],
      "Leaves out the factor 2 for storing both a key and a value, so the cache size is half the real one.",
      [r"(factor|times) (of )?(2|two)|2 ?\*", r"keys? and (a )?values?|values? (are )?(not|never) counted|only (the )?keys", r"\bhalf\b"]),
    M("s14_modern_kvbytes_query_heads", "modern.kv_cache_bytes",
      [("    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value\n",
        "    return 2 * cfg.n_layers * batch * cfg.n_heads * S * cfg.d_head * bytes_per_value\n")],
      "Counts all H query heads instead of the G key/value heads, so grouped heads do not shrink the cache.",
      [r"n_heads", r"query heads", r"kv_heads|\bG\b|group"]),
    M("s14_modern_rope_freq_i_over_K", "modern.rope_frequencies",
      [("    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K",
        "    inv_freq = theta ** (-torch.arange(0, d_head // 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K")],
      "Counts the pairs 0, 1, 2, ... instead of 0, 2, 4, ..., so the exponent is i/K instead of 2i/K and the "
      "frequencies fall only half as fast.",
      [r"2i|2 ?\* ?i", r"\bi ?/ ?K", r"exponent", r"arange\(0, ?d_head ?// ?2\)|step (of )?2"]),
    M("s14_modern_rope_freq_positive_exp", "modern.rope_frequencies",
      [("    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K",
        "    inv_freq = theta ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)   # (K/2,): exponent 2i/K")],
      "Forgets the minus sign in the exponent, so the frequencies grow as theta^(2i/K) instead of falling: "
      "later pairs turn faster, not slower.",
      [r"minus|negative (exponent|power|sign)|\bsign\b", r"grow|increas|faster", r"theta ?\*\* ?\(?\+?2i"]),
    M("s14_modern_apply_rope_interleaved", "modern.apply_rope",
      [("    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # pair (i, i + K/2)",
        "    x1, x2 = x[..., 0::2].to(wide), x[..., 1::2].to(wide)             # pair (i, i + K/2)")],
      "Pairs neighbouring features (even with odd, the GPT-J layout) instead of feature i with i + K/2, and "
      "then writes the results back as two halves, so the features are rotated in the wrong pairs and come "
      "out reordered.",
      [r"interleav", r"even.{0,15}odd|0::2|1::2", r"adjacent|neighbou?r", r"i ?\+ ?K ?/ ?2|halves|GPT-?J|NeoX"]),
    M("s14_modern_apply_rope_ignore_start", "modern.apply_rope",
      [("    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2): positions start .. start + T - 1",
        "    c, s = cos[:T], sin[:T]                                           # (T, K/2): positions start .. start + T - 1")],
      "Takes the first T rows of the cos and sin tables, ignoring start, so positions after a cache are "
      "turned as if they were 0 .. T-1.",
      [r"\bstart\b", r"offset", r"cach(e|ed)"]),
    M("s14_modern_apply_rope_wrong_direction", "modern.apply_rope",
      [("    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)\n",
        "    return torch.cat([x1 * c + x2 * s, -x1 * s + x2 * c], dim=-1).to(x.dtype)\n")],
      "Flips the signs of the sine terms, so every pair is turned by minus the angle (the opposite "
      "direction).",
      [r"\bsigns?\b", r"direction|clockwise|opposite|negative angle|inverse|backwards|minus the angle"]),
    M("s14_modern_rope_attention_rotates_v", "modern.rope_attention",
      [("    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)\n",
        "    q, k, v = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start), apply_rope(v, cos, sin, start)\n")],
      "Turns the values by their positions as well as the queries and keys; values carry content, not "
      "place, so the output is wrong.",
      [r"values? (are |is )?(also )?(rotat|turn)", r"(rotat|turn)\w* (the )?(values|v\b)", r"apply_rope\(v"]),
    M("s14_modern_rope_attention_rerotates_past", "modern.rope_attention",
      [("    q, k = apply_rope(q, cos, sin, start), apply_rope(k, cos, sin, start)\n"
        "    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)\n",
        "    q = apply_rope(q, cos, sin, start)\n"
        "    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)   # (B, H, S0 + T, K)\n"
        "    k_all = apply_rope(k_all, cos, sin)\n")],
      "Turns the whole key cache after appending: the cached keys were already turned, so they are turned a "
      "second time, and the keys returned for the next call are turned twice.",
      [r"twice|again|second time|double", r"already (rotated|turned)", r"(past|cached) (keys|k).{0,30}(rotat|turn)"]),

    # ------------------------------------------------------------------ kernels
    M("s14_kernels_gelu_store_unmasked", "kernels.gelu_kernel",
      [("    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)\n",
        "    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty))\n")],
      "Stores without the mask, so the last, ragged block writes past the end of y.",
      [r"(store|write)\w*.{0,40}(without|no|missing) (a |the |any )?mask|unmasked (store|write)", r"past the end|out of bounds", r"ragged|last block|tail"]),
    M("s14_kernels_gelu_no_block_offset", "kernels.gelu_kernel",
      [("    offs = pid * BLOCK + tl.arange(0, BLOCK)                 # this program's element indices",
        "    offs = tl.arange(0, BLOCK)                               # this program's element indices")],
      "Forgets the program's own offset pid * BLOCK, so every program computes the first block and the rest "
      "of y is never written.",
      [r"pid ?\* ?BLOCK|program_id", r"(every|each|all) (the )?programs?.{0,40}(same|first) block|block 0", r"(own|its) block"]),
    M("s14_kernels_gelu_tanh_identity", "kernels.gelu_kernel",
      [("    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0\n", "    tanh_z = 2.0 * tl.sigmoid(z) - 1.0\n")],
      "Writes tanh(z) as 2·sigmoid(z) - 1, forgetting to double the argument (tanh(z) = 2·sigmoid(2z) - 1); "
      "that is tanh(z/2).",
      [r"sigmoid\(2 ?\* ?z\)|sigmoid of 2 ?z|\b2 ?z\b", r"tanh\(z ?/ ?2\)", r"identity"]),
    M("s14_kernels_ln_padding_in_variance", "kernels.layer_norm_kernel",
      [("    xc = tl.where(mask, x - mean, 0.0)                       # padding lanes would add mean² each",
        "    xc = x - mean                                            # padding lanes would add mean² each")],
      "Centres the padding lanes too: each holds -mean after centring and adds mean² to the variance "
      "whenever D is not a power of two.",
      [r"padding lanes?.{0,60}(variance|mean|centr)|(variance|centr\w*).{0,60}padding", r"tl\.where", r"mean ?(²|\^2|\*\* ?2|squared)", r"inflat"]),
    M("s14_kernels_ln_divide_by_block", "kernels.layer_norm_kernel",
      [("    mean = tl.sum(x, axis=0) / D\n", "    mean = tl.sum(x, axis=0) / BLOCK_D\n"),
       ("    var = tl.sum(xc * xc, axis=0) / D                        # biased variance",
        "    var = tl.sum(xc * xc, axis=0) / BLOCK_D                  # biased variance")],
      "Divides the sums by BLOCK_D, the padded block width, instead of D, the row's real width, so the mean "
      "and variance are too small whenever D is not a power of two.",
      [r"BLOCK_D", r"(block|padded) width", r"real width|instead of D\b|divid\w* by (the )?block"]),
    M("s14_kernels_ln_std_not_rstd", "kernels.layer_norm_kernel",
      [("    rstd = 1.0 / tl.sqrt(var + eps)\n", "    rstd = tl.sqrt(var + eps)\n")],
      "Computes the standard deviation instead of its reciprocal, so the row is multiplied by the std "
      "instead of divided by it (and the saved rstd is wrong).",
      [r"reciprocal|1 ?/ ?(tl\.)?sqrt|one over", r"multipl\w* by (the )?(std|standard deviation)|instead of divid"]),
    M("s14_kernels_ln_bias_always", "kernels.layer_norm_kernel",
      [("    if HAS_BIAS:\n        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n",
        "    y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n")],
      "Adds b_ptr's row even when HAS_BIAS is false; the launcher then passes the weight in its place, so "
      "a LayerNorm without bias adds gamma.",
      [r"HAS_BIAS", r"bias (is )?(always|even when|when there is none)|(no|without a) bias", r"weight (as|added as|in place of) (the )?bias|b_ptr"]),
    M("s14_kernels_softmax_pad_zero", "kernels.softmax_kernel",
      [('    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)',
        "    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)")],
      "Loads the padding lanes as 0 instead of -inf, so they add exp(0 - max) to the sum (and win the max "
      "when the row is all negative) whenever n_cols is not a power of two.",
      [r"other ?= ?0|(loaded|load\w*|fill\w*) (as|with) (0|zero)", r"(instead of|rather than|not) (-inf|minus infinity|negative infinity)", r"padding lanes?.{0,60}(sum|max|exp)"]),
    M("s14_kernels_softmax_load_assumes_contiguous", "kernels.softmax_kernel",
      [('    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)',
        '    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32)')],
      "Finds row r of x at r * n_cols instead of r * x_row_stride, assuming the rows are packed: when x's rows "
      "are a slice of a wider matrix, every row after the first is read from the wrong place.",
      [r"x_row_stride", r"n_cols (as|for) (the )?(row )?stride|assum\w* .{0,20}(contiguous|packed)|stride (is|equals) (not )?(the )?(row'?s? )?(width|n_cols|length)", r"slice|wider matrix"]),
    M("s14_kernels_softmax_no_max", "kernels.softmax_kernel",
      [("    e = tl.exp(x - tl.max(x, axis=0))                        # each <= 1; padding: exp(-inf) = 0",
        "    e = tl.exp(x)                                            # each <= 1; padding: exp(-inf) = 0")],
      "Skips subtracting the row's maximum, so large inputs overflow exp to inf and the row becomes NaN.",
      [r"overflow", r"(subtract|shift)\w* (the )?(row'?s? )?(max|largest)", r"\binf\b|\bnan\b", r"stab"]),
    M("s14_kernels_flash_acc_not_rescaled", "kernels.flash_attention_kernel",
      [('        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")',
        '        acc = acc + tl.dot(p, v, input_precision="ieee")')],
      "Adds each tile's p·v to the accumulator without first rescaling it by alpha = exp(m - m_new), so the "
      "earlier tiles keep weights relative to an outdated maximum while the sum l is rescaled.",
      [r"alpha", r"rescal", r"exp\(m ?- ?m_new\)", r"acc(umulator)?.{0,30}(not|never) (rescaled|multiplied|scaled)"]),
    M("s14_kernels_flash_mask_ignores_start", "kernels.flash_attention_kernel",
      [("        visible = (cols[None, :] < S) & (cols[None, :] <= start + rows[:, None])",
        "        visible = (cols[None, :] < S) & (cols[None, :] <= rows[:, None])")],
      "Compares key j with the query's row number instead of its position start + i, so with cached keys "
      "(start > 0) each query sees too few keys.",
      [r"\bstart\b", r"cach(e|ed)", r"offset|absolute position"]),
    M("s14_kernels_flash_lse_no_max", "kernels.flash_attention_kernel",
      [("    tl.store(lse_ptr + bh * T + rows, m + tl.log(l), mask=rows < T)",
        "    tl.store(lse_ptr + bh * T + rows, tl.log(l), mask=rows < T)")],
      "Stores log(l) as the logsumexp, forgetting to add back the running maximum m that was subtracted "
      "before the exponentials.",
      [r"m ?\+ ?(tl\.)?log", r"(running )?max(imum)? m\b|add\w* (back )?(the )?(running )?max", r"log\(l\) (alone|only)"]),
    M("s14_kernels_flash_kv_head_offset_T", "kernels.flash_attention_kernel",
      [("        k = tl.load(k_ptr + bh * S * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)",
        "        k = tl.load(k_ptr + bh * T * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)"),
       ("        v = tl.load(v_ptr + bh * S * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)",
        "        v = tl.load(v_ptr + bh * T * K + cols[:, None] * K + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)")],
      "Steps to head bh's keys and values with bh·T·K, the queries' head size, instead of bh·S·K; with cached "
      "keys (S > T) every head but the first reads another head's keys and values.",
      [r"bh ?\* ?T ?\* ?K", r"S ?\* ?K|\bS\b instead of T|T instead of S", r"head'?s? (stride|offset|start)|another head"]),
    M("s14_kernels_gelu_launcher_floor_grid", "kernels.gelu_kernel",      # the launcher: graded with its kernel
      [("    grid = (triton.cdiv(n, block),)\n", "    grid = (n // block,)\n")],
      "Launches n // block programs, rounding down, so the last, partial block is never computed (and no "
      "program at all runs when n < block).",
      [r"cdiv|ceil", r"floor|//|round\w* down", r"(last|ragged|partial) block (is )?(never|not) (launched|run|computed)"]),
    M("s14_kernels_flash_launcher_grid_no_batch", "kernels.flash_attention_kernel",      # the launcher: graded with its kernel
      [("    grid = (triton.cdiv(T, block_m), B * H)\n", "    grid = (triton.cdiv(T, block_m), H)\n")],
      "Launches H programs along the second grid axis instead of B * H, so only the first sequence of the "
      "batch is computed.",
      [r"B ?\* ?H", r"grid.{0,40}(batch|sequences)|(batch|sequences).{0,40}grid", r"only the first (sequence|batch)"]),

    # ------------------------------------------------------------------ bpe
    M("s14_bpe_pair_counts_unweighted", "bpe.pair_counts",
      [("            counts[pair] += n\n", "            counts[pair] += 1\n")],
      "Adds 1 for each pair instead of the word's count n, so a word that occurs many times counts once.",
      [r"\+= ?1", r"(word'?s|its) count|weight\w* by|how often (the|each) word", r"once per (word|pair)"]),
    M("s14_bpe_pair_counts_set", "bpe.pair_counts",
      [("        for pair in zip(word, word[1:]):\n            counts", "        for pair in set(zip(word, word[1:])):\n            counts")],
      "Counts each distinct pair once per word (through a set), so overlapping or repeated pairs, such as "
      "(7, 7) twice in (7, 7, 7), are undercounted.",
      [r"\bset\b", r"overlap|repeated pairs?|(same|a) pair (twice|more than once)", r"dedup|distinct|once per word"]),
    M("s14_bpe_merge_pair_no_skip", "bpe.merge_pair",
      [("            out.append(new_id)\n            i += 2\n", "            out.append(new_id)\n            i += 1\n")],
      "Moves one step after a merge instead of two, so the second symbol of the merged pair is used again: "
      "(7, 7, 7) becomes (256, 256, 7).",
      [r"i ?\+= ?2", r"jump|skip|two ahead", r"(reus|used) (again|twice)|overlap|second (symbol|element) (is )?(kept|used)"]),
    M("s14_bpe_merge_pair_drops_last", "bpe.merge_pair",
      [("    while i < len(word):\n        if i + 1", "    while i < len(word) - 1:\n        if i + 1")],
      "Stops the scan one symbol early, so a last symbol that is not part of a merge is dropped.",
      [r"last (symbol|token|element|byte)", r"len\(word\) ?- ?1", r"(drop|lose|lost|miss)\w* (the )?(final|last|trailing)"]),
    M("s14_bpe_most_frequent_max_tiekey", "bpe.most_frequent_pair",
      [("    return min(counts, key=lambda p: (-counts[p], tie_key(p)))\n",
        "    return max(counts, key=lambda p: (counts[p], tie_key(p)))\n")],
      "Takes the max of (count, tie_key), so among equal counts the pair with the largest tie_key wins "
      "instead of the smallest.",
      [r"tie_key|\bties?\b", r"(largest|biggest|greatest) tie_key|smallest tie_key", r"max\("]),
    M("s14_bpe_most_frequent_empty", "bpe.most_frequent_pair",
      [("    if not counts:\n        return None\n    return min", "    return min")],
      "Does not handle an empty tally: min of an empty dict raises ValueError instead of returning None.",
      [r"\bNone\b", r"\bempty\b", r"ValueError"]),
    M("s14_bpe_train_words_not_updated", "bpe.train_bpe",
      [("        words = merged\n", "")],
      "Never replaces the words by their merged versions, so every round counts the original words again and "
      "picks the same pair over and over.",
      [r"words ?= ?merged", r"(never|not) (updat|replac|reassign)|stale|original words", r"same pair (again|every|each|over)|repeat\w* the same"]),
    M("s14_bpe_train_id_off_by_one", "bpe.train_bpe",
      [("        new_id = 256 + len(merges)\n", "        new_id = 257 + len(merges)\n")],
      "Numbers the new tokens from 257 instead of 256, so every merged token id is one too high and later "
      "merges refer to the wrong tokens.",
      [r"257", r"off[- ]by[- ]one", r"256 ?\+ ?(len|r)\b|token 256|one too (high|large)"]),
    M("s14_bpe_encode_leftmost", "bpe.encode",
      [("            pair = min(pairs, key=rank.__getitem__)\n", "            pair = pairs[0]\n")],
      "Merges the leftmost mergeable pair instead of the one learned earliest (lowest rank), so the merges "
      "are not replayed in training order.",
      [r"leftmost|first pair|pairs\[0\]", r"\brank\b|earliest[- ]learned|order (they were )?learned|lowest rank"]),
    M("s14_bpe_encode_latest_first", "bpe.encode",
      [("            pair = min(pairs, key=rank.__getitem__)\n", "            pair = max(pairs, key=rank.__getitem__)\n")],
      "Applies the latest-learned applicable merge (highest rank) first instead of the earliest.",
      [r"max\(", r"latest|highest rank|most recent", r"lowest rank|earliest"]),
    M("s14_bpe_decode_strict", "bpe.decode",
      [('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")',
        '    return b"".join(table[i] for i in ids).decode("utf-8")')],
      "Decodes without errors='replace', so ids whose bytes are not valid UTF-8 raise UnicodeDecodeError "
      "instead of giving U+FFFD.",
      [r"errors ?=|\breplace\b", r"U\+FFFD|�|replacement character", r"UnicodeDecodeError|raises", r"broken|invalid (utf|byte)"]),
    M("s14_bpe_decode_per_token", "bpe.decode",
      [('    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")',
        '    return "".join(table[i].decode("utf-8", errors="replace") for i in ids)')],
      "Decodes each token's bytes separately and joins the strings, so a character whose UTF-8 bytes are "
      "split across tokens becomes replacement characters.",
      [r"(each|every|per) token (separately|on its own|individually)|token by token|separately", r"spans? (several|multiple|two) tokens|split across|multi-?byte", r"(whole|all) at once"]),

    # ------------------------------------------------------------------ optim
    M("s14_optim_lr_cosine_no_half", "optim.lr_at",
      [("    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))\n",
        "    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * progress))\n")],
      "Forgets the factor 1/2 in the cosine, so right after warm-up the rate jumps to 2·lr - min_lr.",
      [r"0\.5|\bhalf\b|1 ?/ ?2", r"twice|double|2 ?[·*] ?lr|\b2lr", r"overshoot|above lr|jumps?"]),
    M("s14_optim_lr_no_cap", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1",
        "    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)   # 0 .. 1")],
      "Does not cap progress at 1, so after max_steps the cosine climbs back up towards lr instead of "
      "staying at min_lr.",
      [r"\bcap|min\(1(\.0)?", r"(after|past|beyond) max_steps", r"(rises|climbs|goes (back )?up|increases) again|back up|cosine (keeps|continues)"]),
    M("s14_optim_lr_progress_ignores_warmup", "optim.lr_at",
      [("    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1",
        "    progress = min(1.0, step / max_steps)   # 0 .. 1")],
      "Measures progress as step / max_steps, from step 0 instead of from the end of warm-up, so the decay "
      "starts partway down: a jump right after warm-up.",
      [r"step ?/ ?max_steps", r"subtract\w* (the )?warm-?up|step ?- ?warmup_steps|warm-?up (steps? )?(offset|not subtracted)", r"(0|zero) at the end of warm-?up|jump"]),
    M("s14_optim_lr_warmup_inclusive", "optim.lr_at",
      [("    if step < warmup_steps:\n", "    if step <= warmup_steps:\n")],
      "Uses <= for the warm-up test, so step warmup_steps still warms up and returns lr·(w + 1)/w, above lr.",
      [r"<=", r"off[- ]by[- ]one", r"(above|exceeds|more than|over|higher than) lr|overshoot|\(w ?\+ ?1\) ?/ ?w"]),
    M("s14_optim_adamw_l2_decay", "optim.adamw_step",
      [("    beta1, beta2 = betas\n    m = beta1", "    beta1, beta2 = betas\n    grad = grad + weight_decay * param\n    m = beta1"),
       ("    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient\n", "")],
      "Adds weight_decay·param to the gradient (L2 regularisation, as plain Adam does) instead of decaying the "
      "weights directly, so the decay is divided by sqrt(v) like the gradient: not AdamW's decoupled decay.",
      [r"decoupl", r"\bL2\b", r"(add\w*|fold\w*|put) (in)?to the gradient|through the gradient", r"plain Adam"]),
    M("s14_optim_adamw_no_bias_correction", "optim.adamw_step",
      [("    m_hat = m / (1 - beta1 ** step)                            # bias correction: both started at 0\n    v_hat = v / (1 - beta2 ** step)\n",
        "    m_hat = m                                                  # bias correction: both started at 0\n    v_hat = v\n")],
      "Skips the bias correction, so the early steps use m and v that are still biased towards their zero "
      "start.",
      [r"bias[- ]correct", r"1 ?- ?beta\w* ?\*\*|beta\w*\^t", r"m_hat|v_hat|m̂|v̂", r"start(ed)? at (0|zero)"]),
    M("s14_optim_adamw_v_not_squared", "optim.adamw_step",
      [("    v = beta2 * v + (1 - beta2) * grad * grad                  # running mean of g²",
        "    v = beta2 * v + (1 - beta2) * grad                         # running mean of g²")],
      "Averages the gradient instead of its square in v, so v can be negative (sqrt gives NaN) and does not "
      "measure the gradient's size.",
      [r"squar", r"g²|g\^2|grad ?\* ?grad|grad ?\*\* ?2"]),
    M("s14_optim_adamw_betas_swapped", "optim.adamw_step",
      [("    beta1, beta2 = betas\n    m = beta1", "    beta2, beta1 = betas\n    m = beta1")],
      "Unpacks betas in the wrong order, so the mean uses beta2 (0.999) and the square's average beta1 (0.9).",
      [r"swap|revers|wrong order", r"beta1.{0,40}beta2|beta2.{0,40}beta1", r"0\.999.{0,40}0\.9\b|0\.9\b.{0,40}0\.999"]),

    # ------------------------------------------------------------------ inside
    M("s14_inside_residual_no_embed", "inside.residual_stream",
      [("    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]",
        "    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in model.blocks]")],
      "Hooks only the blocks and not model.embed, so entry 0 (the embeddings) is missing and the result has "
      "L entries instead of L + 1.",
      [r"(no|without|miss\w*|forg\w*|skip\w*|not) .{0,30}embed", r"entry 0", r"\(L, |L entries|L instead of L ?\+ ?1"]),
    M("s14_inside_residual_hooks_not_removed", "inside.residual_stream",
      [("    try:\n        with torch.no_grad():\n            model(ids)\n    finally:\n        for handle in handles:\n            handle.remove()\n    return torch.stack(seen)",
        "    with torch.no_grad():\n        model(ids)\n    return torch.stack(seen)")],
      "Never removes the hooks, so they stay on the model: every later forward pass keeps appending to the "
      "old list, and a second call records twice as many entries.",
      [r"remov", r"\bhandles?\b", r"finally", r"(stay|left|remain)\w* (behind|registered|attached|on)|leak|accumulat"]),
    M("s14_inside_patterns_no_scale", "inside.attention_patterns",
      [('            scores = (q @ k.transpose(-2, -1) / math.sqrt(K)).masked_fill(future, float("-inf"))',
        '            scores = (q @ k.transpose(-2, -1)).masked_fill(future, float("-inf"))')],
      "Forgets to divide the scores by sqrt(K), so the recomputed patterns are sharper than the model's own.",
      [r"sqrt|√K|square root", r"scal(e|ing)"]),
    M("s14_inside_patterns_mask_diagonal", "inside.attention_patterns",
      [("    future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)\n",
        "    future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu()\n")],
      "Masks with triu() (diagonal 0), which also hides each query's own key: row 0 is all -inf and becomes "
      "NaN, and every other row loses its diagonal.",
      [r"diagonal", r"triu\(\)|triu\(0\)|triu\(1\)", r"itself|own (position|key)", r"\bnan\b"]),
    M("s14_inside_patterns_block_input", "inside.attention_patterns",
      [("    handles = [block.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]",
        "    handles = [block.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]")],
      "Records the block's own input (the raw residual stream) instead of the attention's input, which has "
      "been through ln1, so the weights are recomputed from unnormalised vectors.",
      [r"normali[sz]ed", r"\bln1\b|layer ?norm|before the norm", r"block'?s? (own )?input|raw (residual )?stream"]),
    M("s14_inside_patterns_view_heads", "inside.attention_patterns",
      [("            q, k = (t.view(B, T, H, K).transpose(1, 2) for t in (q, k))   # (B, H, T, K)",
        "            q, k = (t.view(B, H, T, K) for t in (q, k))                 # (B, H, T, K)")],
      "Views q and k straight as (B, H, T, K) without the transpose, mixing positions and heads.",
      [r"view\(B, ?H, ?T, ?K\)", r"mix\w* (up )?(positions|heads)|positions and heads", r"without (the |a )?transpos|transpose\(1, ?2\)"]),
    M("s14_inside_logit_lens_no_norm", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)",
        "        return stream @ model.output_weight().T                        # (L + 1, B, T, V)")],
      "Reads the stream out without the final norm model.ln_f, so even the last entry is not the model's own "
      "logits.",
      [r"ln_f", r"final norm", r"(without|skip\w*|no|forg\w*) (the )?(final )?norm"]),
    M("s14_inside_logit_lens_token_table", "inside.logit_lens",
      [("        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)",
        "        return model.ln_f(stream) @ model.embed.token_table.T          # (L + 1, B, T, V)")],
      "Uses the token table as the output matrix instead of model.output_weight(), which is only right when "
      "the head is tied.",
      [r"output_weight", r"token[_ ]table", r"untied|not tied|tying|\btied\b"]),
    M("s14_inside_induction_same_token", "inside.induction_scores",
      [("    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)",
        "    return patterns[..., t, t - period].mean(dim=(1, 3))               # (L, B, H, P') -> (L, H)")],
      "Reads the weight on key t - period, the earlier copy of the same token, instead of t - period + 1, the "
      "token that followed it.",
      [r"t ?- ?period(?! ?\+)", r"(same|earlier|previous) (token|copy)|copy itself", r"\+ ?1|(token|position|key) (right |just )?after|follow"]),
]


VARIANTS = [
    V("s14_v_embeddings_lookup_index_select", "embeddings.embed_lookup",
      [("    return table[ids]\n", "    return table.index_select(0, ids.reshape(-1)).reshape(*ids.shape, table.shape[-1])\n")],
      "The lookup as index_select on the flattened ids, then the ids' shape restored."),
    V("s14_v_embeddings_cosine_matmul_dot", "embeddings.cosine_similarity",
      [("    dot = (u * v).sum(-1)\n", "    dot = (u.unsqueeze(-2) @ v.unsqueeze(-1)).squeeze(-1).squeeze(-1)\n")],
      "The row-wise dot product as a batched (1, D) @ (D, 1) matrix product."),
    V("s14_v_attention_average_cumsum", "attention.average_past",
      [("    return torch.stack([x[..., :i + 1, :].mean(dim=-2) for i in range(T)], dim=-2)   # (..., T, D)",
        "    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device).unsqueeze(-1)   # (T, 1)\n"
        "    return torch.cumsum(x, dim=-2) / counts")],
      "A running sum divided by the number of rows it holds, no loop."),
    V("s14_v_attention_cavg_arange", "attention.causal_average_weights",
      [("    return w / w.sum(dim=-1, keepdim=True)           # each row divided by its count",
        "    return w / torch.arange(1, T + 1, dtype=torch.float32).unsqueeze(1)")],
      "Row i divided by i + 1 from an arange instead of the row sums."),
    V("s14_v_attention_scores_einsum", "attention.attention_scores",
      [("    return q @ k.transpose(-2, -1)\n", "    return torch.einsum('...tk,...sk->...ts', q, k)\n")],
      "The score table as an einsum over the head width."),
    V("s14_v_attention_causal_mask_tril", "attention.causal_mask",
      [("    i = torch.arange(T, device=device)[:, None]   # (T, 1)\n"
        "    j = torch.arange(S, device=device)[None, :]   # (1, S)\n"
        "    return j <= i + (S - T)\n",
        "    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)\n")],
      "The mask as the lower triangle of a boolean matrix, shifted right by the S - T cached keys."),
    V("s14_v_attention_softmax_max_values", "attention.softmax",
      [("    z = scores - scores.amax(dim=-1, keepdim=True)\n    e = z.exp()\n",
        "    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)\n")],
      "Row maximum through .max(...).values and torch.exp."),
    V("s14_v_multihead_merge_cat_heads", "multihead.merge_heads",
      [("    B, H, T, K = x.shape\n    return x.transpose(1, 2).reshape(B, T, H * K)\n",
        "    return torch.cat(x.unbind(dim=1), dim=-1)\n")],
      "Concatenates the H head outputs side by side along the features."),
    V("s14_v_multihead_entropy_loop_heads", "multihead.head_entropy",
      [("    return per_query.mean(dim=(0, 2))                                  # (H,)",
        "    return torch.stack([per_query[:, h].mean() for h in range(per_query.shape[1])])   # (H,)")],
      "The average over batch and queries taken head by head in a loop, then stacked."),
    V("s14_v_mlp_gelu_tanh_sigmoid", "mlp.gelu_tanh",
      [("    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))",
        "    return x * torch.sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x))")],
      "0.5·(1 + tanh z) written as sigmoid(2z)."),
    V("s14_v_block_layer_norm_var_rsqrt", "block.layer_norm",
      [("    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)         # (..., 1), biased\n"
        "    y = (x - mean) / torch.sqrt(var + eps)\n",
        "    var = x.var(dim=-1, keepdim=True, correction=0)            # (..., 1), biased\n"
        "    y = (x - mean) * torch.rsqrt(var + eps)\n")],
      "Biased variance from Tensor.var(correction=0) and a multiplication by rsqrt."),
    V("s14_v_modern_swiglu_sigmoid", "modern.swiglu",
      [("    return F.silu(gate) * up\n", "    return gate * torch.sigmoid(gate) * up\n")],
      "Swish written out as gate·sigmoid(gate)."),
    V("s14_v_modern_hidden_integer_ceil", "modern.swiglu_hidden_dim",
      [("    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)\n",
        "    return -(-8 * d_model // (3 * multiple_of)) * multiple_of\n")],
      "Integer ceiling division, no floats."),
    V("s14_v_modern_rope_freq_broadcast", "modern.rope_frequencies",
      [("    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)              # (T, K/2)",
        "    angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]       # (T, K/2)")],
      "The table of angles by broadcasting a column of positions against a row of frequencies."),
    V("s14_v_optim_adamw_lerp", "optim.adamw_step",
      [("    m = beta1 * m + (1 - beta1) * grad                         # running mean of g\n"
        "    v = beta2 * v + (1 - beta2) * grad * grad                  # running mean of g²\n",
        "    m = torch.lerp(m, grad, 1 - beta1)                         # running mean of g\n"
        "    v = torch.lerp(v, grad * grad, 1 - beta2)                  # running mean of g²\n")],
      "The running averages as torch.lerp towards the new value."),
    V("s14_v_bpe_pair_counts_dict", "bpe.pair_counts",
      [("    counts = Counter()\n    for word, n in words.items():\n        for pair in zip(word, word[1:]):\n            counts[pair] += n\n    return dict(counts)\n",
        "    counts = {}\n    for word, n in words.items():\n        for i in range(len(word) - 1):\n            pair = (word[i], word[i + 1])\n            counts[pair] = counts.get(pair, 0) + n\n    return counts\n")],
      "A plain dict with .get and an index loop instead of Counter and zip."),
    V("s14_v_kernels_gelu_sigmoid", "kernels.gelu_kernel",
      [("    tanh_z = 2.0 * tl.sigmoid(2.0 * z) - 1.0\n    y = 0.5 * x * (1.0 + tanh_z)\n",
        "    y = x * tl.sigmoid(2.0 * z)                              # 0.5·(1 + tanh z) = sigmoid(2z)\n")],
      "GELU's tanh form as x·sigmoid(2z), no tanh at all."),
    V("s14_v_inside_induction_diagonal", "inside.induction_scores",
      [("    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat\n"
        "    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)",
        "    diag = patterns.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)   # (L, B, H, T - period + 1): [i, i - period + 1]\n"
        "    return diag[..., 1:].mean(dim=(1, 3))                              # queries period .. T - 1")],
      "The weights [t, t - period + 1] read as a sub-diagonal of each pattern."),
]
