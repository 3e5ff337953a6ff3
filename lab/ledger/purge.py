"""The script of Ledger.purge: in one run's ledger, each cell of one queue
("<queue>:<kind>/<variant>") gets its pending tasks added to `purged`, at once
(no settle can fall between the read and the write); it returns how many."""

PURGE = """
local counts, cells = {}, {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local field = fields[i]
  counts[field] = tonumber(fields[i + 1]) or 0
  if string.sub(field, 1, #ARGV[1]) == ARGV[1] and string.sub(field, -9) == ':enqueued' then
    cells[#cells + 1] = string.sub(field, 1, #field - 9)
  end
end
local total = 0
for _, cell in ipairs(cells) do
  local pending = counts[cell .. ':enqueued'] - (counts[cell .. ':completed'] or 0)
    - (counts[cell .. ':failed'] or 0) - (counts[cell .. ':purged'] or 0)
  if pending > 0 then
    redis.call('HINCRBY', KEYS[1], cell .. ':purged', pending)
    total = total + pending
  end
end
return total
"""
