# Counts the heavy formats in an `atc --mode=1` JSON dump (used by om_report.sh): Conv2D ops whose
# weight is FRACTAL_Z, all Conv2D ops, and TransData ops.
import json
import sys

ops = json.load(open(sys.argv[1]))["graph"][0]["op"]
convs = [o for o in ops if o["type"] == "Conv2D"]
fractal = [o for o in convs
           if len(o.get("input_desc", [])) > 1 and o["input_desc"][1].get("layout") == "FRACTAL_Z"]
trans = sum(o["type"] == "TransData" for o in ops)
print(f"{len(fractal)} of {len(convs)} Conv2D FRACTAL_Z, {trans} TransData")
