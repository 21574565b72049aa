import json,sys
d=json.load(open(sys.argv[1]))
for k in ("plain","fusion_donate"):
    v=d.get(k)
    if isinstance(v,dict):
        r=v["run"]; rn=v.get("run_npz",{})
        d[k]=f"budget={r.get('budget')} rc={r.get('rc')} match={r.get('match')} peaks={r.get('peaks(meas,plan,checker)')} npz_rc={rn.get('rc')} npz_rel={rn.get('npz_rel')} {r.get('err','')[:300]} {rn.get('err','')[:600]}"
    elif isinstance(v,str): d[k]=v[:300]
print(json.dumps(d)[:2000])
