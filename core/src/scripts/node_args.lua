-- Header of the per-node renewal scripts (scripts/mod.rs, node_script!): the keys come as
-- arguments, ARGV[1] = n, ARGV[2 .. n + 1] the keys, the script's own arguments after them.
local KEYS, ARGV = (function(argv)
    local n = tonumber(argv[1])
    local keys, args = {}, {}
    for i = 1, n do keys[i] = argv[i + 1] end
    for i = n + 2, #argv do args[#args + 1] = argv[i] end
    return keys, args
end)(ARGV)
