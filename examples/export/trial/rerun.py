import json, os, re, subprocess, glob, sys
rows=[]
for sj in sorted(glob.glob('/tmp/trial/**/*.summary.json', recursive=True)):
    d=json.load(open(sj)); dr=os.path.dirname(sj); f=d['file']; bind=d['bind']
    log=os.path.join(dr, f+'.ebb.log')
    npz=None
    if os.path.exists(log):
        m=re.search(r'--inputs (\S+)', open(log).read())
        if m: npz=m.group(1)
    if not npz:
        stem=f.rsplit('.',1)[0]
        for c in [stem+'.ref0.npz', stem+'.ref.npz']:
            if os.path.exists(os.path.join(dr,c)): npz=c; break
    args=['python3','/tmp/trial/drive.py',f,bind]
    if npz: args+=['--npz',npz]
    if '_optimizer' in f: args+=['--params-from', f.replace('_optimizer','_training')]
    if f.endswith('.mlir'): args+=['--jax']
    p=subprocess.run(args,cwd=dr,capture_output=True,text=True)
    out=p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-300:]
    rows.append(out)
    print(out[:600], flush=True)
