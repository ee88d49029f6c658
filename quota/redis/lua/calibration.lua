-- calibration.lua: the learned estimate ratio (quota.Ratio).

-- ratioAt returns the root's learned estimate ratio at now, within
-- [minR, maxR], back toward 1 by half every half µs since it was learned:
-- quota.Ratio.ValueAt.
local function ratioAt(minR, maxR, half)
  local v = tonumber(root.st['er'] or '')
  if not v then return 1 end
  local age = now - tonumber(root.st['et'])
  if age > 0 then v = 1 + (v - 1) * 2 ^ (-age / half) end
  if v < minR then v = minR end
  if v > maxR then v = maxR end
  return v
end

-- learn folds one sample (the provider's count over the prompt's estimate)
-- into the root's ratio: quota.Ratio.Learn. With the last two, the ratio
-- rises at once to their median, or falls RATIO_FALL of the way to their
-- highest.
local function learn(sample, minR, maxR, half)
  local st = root.st
  local cur = ratioAt(minR, maxR, half)
  local s = sample
  if s < minR then s = minR end
  if s > maxR then s = maxR end
  local p1 = tonumber(st['e1'] or '') or cur
  local p2 = tonumber(st['e2'] or '') or cur
  local lo, hi = math.min(s, p1), math.max(s, p1) -- no swap: gopher-lua (miniredis) gets a, b = b, a wrong
  local top = hi
  if p2 > top then top = p2 end
  if hi > p2 then hi = p2 end
  local m = lo > hi and lo or hi
  local v = cur
  if m > cur then
    v = m
  elseif top < cur then
    v = cur + RATIO_FALL * (top - cur)
  end
  if v < minR then v = minR end
  if v > maxR then v = maxR end
  local at = nowS
  if st['et'] and tonumber(st['et']) > now then at = st['et'] end
  local e1 = st['e1'] or ''
  put(root, 'er', fmt(v), 'et', at)
  put(root, 'e1', fmt(s), 'e2', e1)
end

